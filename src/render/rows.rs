//! Per-record listings (`cswitch`, `events`) written as they are produced: a table, CSV,
//! a JSON array or JSON Lines, one row at a time, so a listing of millions of rows never sits
//! in memory.
//!
//! CSV columns are the row's JSON fields, in the same order (nested values as compact JSON
//! text), every field made inert by `csv_field`; JSON Lines adds the Timesketch fields
//! (`datetime`, `timestamp_desc`, `message`, and for timeline rows `timestamp` in microseconds
//! since 1970) to each row's object, and leaves out timeline rows without a known time unless
//! asked to keep them ([`RowWriter::keep_untimed`]); JSON is the envelope of
//! `Envelope` (docs/output-contract.md), the same text `serde_json::to_string_pretty`
//! gives for it.

use super::csv::{csv_field, csv_line};
use crate::report::RowFormat;
use crate::warning::Warning;
use serde::Serialize;
use serde_json::Value;
use std::io::{self, Write};

pub(crate) use crate::report::FORMAT_VERSION;

/// The JSON output of every listing command: `{"format_version", "command", "records",
/// "warnings"}`; `jq '.records[]'` gives the rows, `jq '.warnings[]'` the typed warnings.
#[derive(Serialize)]
pub(crate) struct Envelope<'a, T: Serialize> {
    pub format_version: u32,
    pub command: &'a str,
    pub records: &'a [T],
    pub warnings: &'a [Warning],
}

impl<'a, T: Serialize> Envelope<'a, T> {
    /// The JSON envelope of `command` around `records` and `warnings`.
    pub fn new(command: &'a str, records: &'a [T], warnings: &'a [Warning]) -> Self {
        Envelope {
            format_version: FORMAT_VERSION,
            command,
            records,
            warnings,
        }
    }
}

/// The Timesketch fields of one row.
pub struct Timesketch {
    /// ISO-8601 UTC, or None when the time is unknown.
    pub datetime: Option<String>,
    pub timestamp_desc: &'static str,
    pub message: String,
}

impl Timesketch {
    /// Microseconds since 1970-01-01 UTC of a FILETIME (Timesketch's `timestamp`).
    pub(crate) fn micros(filetime: u64) -> i64 {
        (filetime as i64 - FILETIME_UNIX_EPOCH) / 10
    }
}

/// The FILETIME of 1970-01-01 00:00 UTC.
const FILETIME_UNIX_EPOCH: i64 = 116_444_736_000_000_000;

/// What a renderer needs of a row type beyond its JSON form.
pub trait Row: Serialize + Default {
    /// The table's header line (without newline).
    fn table_header() -> String;
    /// The row as a table line (without newline).
    fn table_line(&self) -> String;
    /// The row's Timesketch fields (JSON Lines).
    fn timesketch(&self) -> Timesketch;
    /// Per-record timeline rows (`cswitch`, `events`): their JSON Lines carry Timesketch's
    /// `timestamp`, and rows without a known time are left out unless kept.
    fn timeline() -> bool {
        false
    }
    /// A timeline row's time as a FILETIME (None: unknown).
    fn filetime(&self) -> Option<u64> {
        None
    }
}

/// The CSV columns of `R`: the keys of its JSON object.
pub fn columns<R: Row>() -> Vec<String> {
    match serde_json::to_value(R::default()) {
        Ok(Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// One JSON value as CSV text: strings as they are, null as empty, others as JSON.
fn csv_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Writes rows of one type in one format to `out`, as they come.
pub struct RowWriter<W: Write, R: Row> {
    out: W,
    format: RowFormat,
    command: &'static str,
    columns: Vec<String>,
    rows: u64,
    keep_untimed: bool,
    untimed_left_out: u64,
    /// The JSON Lines line being built, kept between rows (one allocation per listing).
    line: Vec<u8>,
    _row: std::marker::PhantomData<fn(&R)>,
}

impl<W: Write, R: Row> RowWriter<W, R> {
    /// Start the listing of `command`: writes the table header, the CSV header line or the
    /// JSON envelope's opening.
    pub fn new(mut out: W, format: RowFormat, command: &'static str) -> io::Result<Self> {
        let columns = columns::<R>();
        match format {
            RowFormat::Table => writeln!(out, "{}", R::table_header())?,
            RowFormat::Csv => out.write_all(csv_line(&columns).as_bytes())?,
            RowFormat::Json => {
                let v = serde_json::to_string(command).map_err(io::Error::other)?;
                write!(
                    out,
                    "{{\n  \"format_version\": {FORMAT_VERSION},\n  \"command\": {v},\n  \"records\": ["
                )?;
            }
            RowFormat::Jsonl => {}
        }
        Ok(RowWriter {
            out,
            format,
            command,
            columns,
            rows: 0,
            keep_untimed: false,
            untimed_left_out: 0,
            line: Vec::new(),
            _row: std::marker::PhantomData,
        })
    }

    /// JSON Lines of timeline rows: keep rows without a known time (`datetime` and
    /// `timestamp` null; Timesketch's importer cannot place them) instead of leaving them out.
    pub fn keep_untimed(mut self, keep: bool) -> Self {
        self.keep_untimed = keep;
        self
    }

    /// The warning about the timeline rows left out of JSON Lines for want of a time, if any
    /// were.
    pub fn untimed_warning(&self) -> Option<Warning> {
        (self.untimed_left_out > 0).then(|| {
            Warning::new(
                crate::warning::WarningKind::Time,
                format!(
                    "{} {} rows without a known time were left out of the JSON Lines (Timesketch needs a time on every line; --keep-untimed keeps them, with datetime and timestamp null)",
                    self.untimed_left_out, self.command
                ),
            )
        })
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Write one row (streamed: nothing is kept).
    pub fn row(&mut self, r: &R) -> io::Result<()> {
        match self.format {
            // Input text in a row is escaped where the row is formatted (`Untrusted`'s
            // Display); the line is escaped once more as a whole so that no row type can
            // put a raw control character on the terminal (a no-op on clean lines).
            RowFormat::Table => {
                writeln!(self.out, "{}", crate::text::escape_lines(&r.table_line()))?
            }
            RowFormat::Csv => {
                let v = serde_json::to_value(r).map_err(io::Error::other)?;
                let line: String = self
                    .columns
                    .iter()
                    .map(|c| csv_field(&v.get(c).map(csv_text).unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(",");
                self.out.write_all(line.as_bytes())?;
                self.out.write_all(b"\n")?;
            }
            RowFormat::Jsonl => {
                // The row's object with the Timesketch fields appended before its closing
                // brace (no intermediate Value: this path writes millions of lines).
                let t = r.timesketch();
                if R::timeline() && t.datetime.is_none() && !self.keep_untimed {
                    self.untimed_left_out += 1;
                    return Ok(());
                }
                let mut line = std::mem::take(&mut self.line);
                line.clear();
                serde_json::to_writer(&mut line, r).map_err(io::Error::other)?;
                if line.last() == Some(&b'}') {
                    line.pop();
                    if line.len() > 1 {
                        line.push(b',');
                    }
                    line.extend_from_slice(b"\"datetime\":");
                    serde_json::to_writer(&mut line, &t.datetime).map_err(io::Error::other)?;
                    if R::timeline() {
                        let us = t
                            .datetime
                            .as_ref()
                            .and(r.filetime())
                            .map(Timesketch::micros);
                        line.extend_from_slice(b",\"timestamp\":");
                        serde_json::to_writer(&mut line, &us).map_err(io::Error::other)?;
                    }
                    line.extend_from_slice(b",\"timestamp_desc\":");
                    serde_json::to_writer(&mut line, t.timestamp_desc).map_err(io::Error::other)?;
                    line.extend_from_slice(b",\"message\":");
                    serde_json::to_writer(&mut line, &t.message).map_err(io::Error::other)?;
                    line.push(b'}');
                }
                super::text::json_terminal_safe(&mut line);
                line.push(b'\n');
                let written = self.out.write_all(&line);
                self.line = line;
                written?;
            }
            RowFormat::Json => {
                // As to_string_pretty of the envelope: each record indented by four spaces,
                // ",\n" between them.
                let text = pretty(r)?;
                self.out
                    .write_all(if self.rows == 0 { b"\n" } else { b",\n" })?;
                indent(&mut self.out, &text, "    ")?;
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// End the listing with its warnings (the JSON envelope's `warnings`; the other formats
    /// leave warnings to the caller) and give the writer back.
    pub fn finish(mut self, warnings: &[Warning]) -> io::Result<W> {
        if self.format == RowFormat::Json {
            self.out
                .write_all(if self.rows == 0 { b"]," } else { b"\n  ]," })?;
            self.out.write_all(b"\n  \"warnings\": ")?;
            let text = pretty(&warnings)?;
            let mut lines = text.lines();
            if let Some(first) = lines.next() {
                self.out.write_all(first.as_bytes())?;
            }
            for line in lines {
                self.out.write_all(b"\n  ")?;
                self.out.write_all(line.as_bytes())?;
            }
            self.out.write_all(b"\n}\n")?;
        }
        self.out.flush()?;
        Ok(self.out)
    }

    /// The command this listing belongs to.
    pub fn command(&self) -> &'static str {
        self.command
    }
}

/// Pretty JSON text, terminal-safe.
fn pretty<T: Serialize + ?Sized>(v: &T) -> io::Result<String> {
    let mut t = serde_json::to_vec_pretty(v).map_err(io::Error::other)?;
    super::text::json_terminal_safe(&mut t);
    String::from_utf8(t).map_err(io::Error::other)
}

/// Terminal-safe pretty JSON of a whole value (the envelope of the listing commands).
pub(crate) fn to_json_pretty<T: Serialize + ?Sized>(v: &T) -> io::Result<String> {
    pretty(v)
}

/// Write `text`'s lines, each with `prefix`, without a final newline.
fn indent(out: &mut impl Write, text: &str, prefix: &str) -> io::Result<()> {
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.write_all(b"\n")?;
        }
        out.write_all(prefix.as_bytes())?;
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// All of `rows` of `command` in `format`, as text (for callers that hold the rows anyway).
pub fn to_string<R: Row>(
    rows: &[R],
    warnings: &[Warning],
    format: RowFormat,
    command: &'static str,
) -> String {
    let mut w = match RowWriter::<Vec<u8>, R>::new(Vec::new(), format, command) {
        Ok(w) => w,
        Err(_) => return String::new(),
    };
    for r in rows {
        if w.row(r).is_err() {
            break;
        }
    }
    let bytes = w.finish(warnings).unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Default, Clone)]
    struct T {
        a: u32,
        b: Option<String>,
        c: Vec<u8>,
    }

    impl Row for T {
        fn table_header() -> String {
            "A".into()
        }
        fn table_line(&self) -> String {
            self.a.to_string()
        }
        fn timesketch(&self) -> Timesketch {
            Timesketch {
                datetime: None,
                timestamp_desc: "t",
                message: format!("m{}", self.a),
            }
        }
    }

    /// A timeline row: a time when `ft` is set.
    #[derive(Serialize, Default, Clone)]
    struct Tl {
        n: u32,
        #[serde(skip)]
        ft: Option<u64>,
    }

    impl Row for Tl {
        fn table_header() -> String {
            "N".into()
        }
        fn table_line(&self) -> String {
            self.n.to_string()
        }
        fn timesketch(&self) -> Timesketch {
            Timesketch {
                datetime: self.ft.map(crate::time::filetime_to_iso8601),
                timestamp_desc: "t",
                message: format!("n{}", self.n),
            }
        }
        fn timeline() -> bool {
            true
        }
        fn filetime(&self) -> Option<u64> {
            self.ft
        }
    }

    /// Timeline JSON Lines: Timesketch's `timestamp` is µs since 1970 of the row's time
    /// (2021-02-21T01:38:19.6604190Z = 1613871499660419 µs); a row without a time is left out
    /// and counted, or kept with nulls when asked.
    #[test]
    fn timeline_jsonl_for_timesketch() {
        let rows = [
            Tl {
                n: 1,
                ft: Some(132_583_450_996_604_190),
            },
            Tl { n: 2, ft: None },
        ];
        let mut w = RowWriter::<_, Tl>::new(Vec::new(), RowFormat::Jsonl, "t").unwrap();
        for r in &rows {
            w.row(r).unwrap();
        }
        assert_eq!(w.untimed_left_out, 1);
        assert!(w
            .untimed_warning()
            .unwrap()
            .message
            .starts_with("1 t rows without"));
        let text = String::from_utf8(w.finish(&[]).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"n\":1,\"datetime\":\"2021-02-21T01:38:19.6604190Z\",\"timestamp\":1613871499660419,\"timestamp_desc\":\"t\",\"message\":\"n1\"}\n"
        );
        let mut w = RowWriter::<_, Tl>::new(Vec::new(), RowFormat::Jsonl, "t")
            .unwrap()
            .keep_untimed(true);
        for r in &rows {
            w.row(r).unwrap();
        }
        assert_eq!(w.untimed_left_out, 0);
        assert!(w.untimed_warning().is_none());
        let text = String::from_utf8(w.finish(&[]).unwrap()).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.ends_with(
            "{\"n\":2,\"datetime\":null,\"timestamp\":null,\"timestamp_desc\":\"t\",\"message\":\"n2\"}\n"
        ));
        // Before 1970 (a FILETIME of 1601): negative microseconds, not a wrap.
        assert_eq!(Timesketch::micros(0), -11_644_473_600_000_000);
    }

    #[test]
    fn every_format_streams_what_the_whole_list_would_give() {
        let rows = vec![
            T {
                a: 1,
                b: Some("=x,\u{1b}".into()),
                c: vec![1, 2],
            },
            T::default(),
        ];
        let w =
            [crate::warning::Warning::new(crate::warning::WarningKind::Anomaly, "odd").logger(2)];
        for (rows, warnings) in [
            (&rows[..], &w[..]),
            (&[][..], &[][..]),
            (&rows[..], &[][..]),
        ] {
            assert_eq!(
                to_string(rows, warnings, RowFormat::Json, "t"),
                serde_json::to_string_pretty(&Envelope::new("t", rows, warnings)).unwrap() + "\n"
            );
        }
        assert_eq!(
            to_string(&rows, &w, RowFormat::Csv, "t"),
            "a,b,c\n1,\"'=x,\\u{1b}\",\"[1,2]\"\n0,,[]\n"
        );
        assert_eq!(to_string(&rows, &w, RowFormat::Table, "t"), "A\n1\n0\n");
        let l = to_string(&rows, &w, RowFormat::Jsonl, "t");
        let first: Value = serde_json::from_str(l.lines().next().unwrap()).unwrap();
        assert_eq!(first["message"], "m1");
        assert_eq!(first["datetime"], Value::Null);
        assert_eq!(first["c"], serde_json::json!([1, 2]));
        assert_eq!(l.lines().count(), 2);
    }
}
