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

use super::csv::csv_line;
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

/// The Timesketch fields of one row (its `message` is written into a buffer the writer
/// reuses: [`Row::timesketch`]).
pub struct Timesketch<'a> {
    /// ISO-8601 UTC, or None when the time is unknown.
    pub datetime: Option<&'a str>,
    pub timestamp_desc: &'static str,
}

impl Timesketch<'_> {
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
    /// The row's Timesketch fields (JSON Lines), its one-line `message` appended to
    /// `message`.
    fn timesketch(&self, message: &mut String) -> Timesketch<'_>;
    /// The row's Timesketch `message` alone.
    fn message(&self) -> String {
        let mut m = String::new();
        self.timesketch(&mut m);
        m
    }
    /// Per-record timeline rows (`cswitch`, `events`): their JSON Lines carry Timesketch's
    /// `timestamp`, and rows without a known time are left out unless kept.
    fn timeline() -> bool {
        false
    }
    /// A timeline row's time as a FILETIME (None: unknown).
    fn filetime(&self) -> Option<u64> {
        None
    }
    /// The row's compact JSON object (terminal-safe) appended to `out`: its serde form, which
    /// a row type of millions of rows may write field by field instead (the same bytes:
    /// checked on every row in debug builds).
    fn write_json(&self, out: &mut Vec<u8>) -> io::Result<()> {
        super::json::write(out, self, true).map_err(io::Error::other)
    }
}

/// The CSV columns of `R`: the keys of its JSON object.
pub fn columns<R: Row>() -> Vec<String> {
    match serde_json::to_value(R::default()) {
        Ok(Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// How one row becomes text in one format, with the scratch buffers kept between rows (one
/// allocation per listing, not per row).
#[derive(Clone)]
struct Lines {
    format: RowFormat,
    columns: Vec<String>,
    keep_untimed: bool,
    /// The CSV row's cell texts.
    cell_text: Vec<u8>,
    /// The CSV row's cells: spans of `cell_text`, one per column.
    cells: Vec<Option<std::ops::Range<usize>>>,
    /// The Timesketch message (JSON Lines) and the CSV line.
    text: String,
}

impl Lines {
    /// Append row `index` (0-based: the rows given before it) to `out`; false when it is left
    /// out (a timeline row without a known time, in JSON Lines, unless kept).
    fn render<R: Row>(&mut self, r: &R, index: u64, out: &mut Vec<u8>) -> io::Result<bool> {
        match self.format {
            // Input text in a row is escaped where the row is formatted (`Untrusted`'s
            // Display); the line is escaped once more as a whole so that no row type can
            // put a raw control character on the terminal (a no-op on clean lines).
            RowFormat::Table => {
                out.extend_from_slice(crate::text::escape_lines(&r.table_line()).as_bytes());
                out.push(b'\n');
            }
            RowFormat::Csv => {
                // Each column's cell as `serde_json::to_value` and `csv_text` (the tests'
                // definition) gave it, made inert by `csv_field`, without a Value.
                self.cell_text.clear();
                self.text.clear();
                self.cells.clear();
                self.cells.resize(self.columns.len(), None);
                super::json::cells(r, &self.columns, &mut self.cell_text, &mut self.cells)?;
                for (i, cell) in self.cells.iter().enumerate() {
                    if i > 0 {
                        self.text.push(',');
                    }
                    if let Some(span) = cell {
                        let cell = std::str::from_utf8(&self.cell_text[span.clone()])
                            .map_err(io::Error::other)?;
                        super::csv::push_csv_field(&mut self.text, cell);
                    }
                }
                self.text.push('\n');
                out.extend_from_slice(self.text.as_bytes());
            }
            RowFormat::Jsonl => {
                // The row's object with the Timesketch fields appended before its closing
                // brace, terminal-safe as it is written (no intermediate Value or pass).
                self.text.clear();
                let t = r.timesketch(&mut self.text);
                if R::timeline() && t.datetime.is_none() && !self.keep_untimed {
                    return Ok(false);
                }
                jsonl_line(out, r, &t, &self.text)?;
                out.push(b'\n');
            }
            RowFormat::Json => {
                // As to_string_pretty of the envelope: each record indented by four spaces,
                // ",\n" between them.
                let text = pretty(r)?;
                out.extend_from_slice(if index == 0 { b"\n" } else { b",\n" });
                indent(out, &text, "    ")?;
            }
        }
        Ok(true)
    }
}

/// Rows given to a [`RowWriter`] at a time in parallel mode.
const BATCH: usize = 1024;
/// The most a text buffer is reserved ahead for a batch (rows of a few KiB each).
const MAX_TEXT_HINT: usize = 16 << 20;
/// Batches each rendering thread may have queued or done but not yet written.
const IN_FLIGHT_PER_WORKER: u64 = 2;

/// A batch rendered: its text, rows written, rows left out, and the batch's rows given back
/// (dropped and their vector reused by the thread that made them: freeing on the thread that
/// allocated is cheaper, and the rendering threads do the larger share of the work).
type Rendered<R> = io::Result<(Vec<u8>, u64, u64, Vec<R>)>;

/// A batch for a rendering thread: the index of its first row, its rows, and a text buffer
/// to render into (recycled from a written batch).
type Job<R> = (u64, Vec<R>, Vec<u8>);

/// A rendering thread: batches in, text out.
pub(crate) struct Worker<R> {
    tx: Option<std::sync::mpsc::SyncSender<Job<R>>>,
    rx: std::sync::mpsc::Receiver<Rendered<R>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl<R: Row + Send + 'static> Worker<R> {
    fn spawn(mut lines: Lines) -> Self {
        let (tx, batches) = std::sync::mpsc::sync_channel::<Job<R>>(IN_FLIGHT_PER_WORKER as usize);
        // Unbounded, but the writer never has more than IN_FLIGHT_PER_WORKER batches of a
        // worker outstanding (`Pipeline::dispatch`).
        let (done, rx) = std::sync::mpsc::channel::<Rendered<R>>();
        let handle = std::thread::Builder::new()
            .name("etwdump-render".into())
            .spawn(move || {
                for (first, batch, mut out) in batches {
                    out.clear();
                    let (mut written, mut left_out) = (0, 0);
                    let mut result = Ok(());
                    for (i, r) in batch.iter().enumerate() {
                        match lines.render(r, first + i as u64, &mut out) {
                            Ok(true) => written += 1,
                            Ok(false) => left_out += 1,
                            Err(e) => {
                                result = Err(e);
                                break;
                            }
                        }
                    }
                    if done
                        .send(result.map(|()| (out, written, left_out, batch)))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        match handle {
            Ok(h) => Worker {
                tx: Some(tx),
                rx,
                handle: Some(h),
            },
            // No thread: a worker whose channel is closed; `Pipeline` falls back to rendering
            // on the caller's thread.
            Err(_) => Worker {
                tx: None,
                rx,
                handle: None,
            },
        }
    }
}

impl<R> Drop for Worker<R> {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Rendering on other threads, in order: batch k goes to worker k mod n, and batches are
/// written in the order they were given.
struct Pipeline<R> {
    threads: usize,
    /// How a row is copied into the batch and a worker started (given by
    /// [`RowWriter::parallel`], whose bounds they need).
    copy: fn(&R) -> R,
    spawn: fn(Lines) -> Worker<R>,
    workers: Vec<Worker<R>>,
    batch: Vec<R>,
    /// Emptied batch vectors and written text buffers, for the next batches.
    spare_batches: Vec<Vec<R>>,
    spare_text: Vec<Vec<u8>>,
    /// The length of the last batch's text: a text buffer given back empty (the writer had
    /// none to spare) is reserved this much before it is rendered into, instead of growing
    /// by doubling on the rendering thread (about six copies of the text a batch).
    text_hint: usize,
    /// Batches sent, batches written.
    sent: u64,
    written: u64,
    /// Rows given so far (the next row's index).
    given: u64,
}

/// Write rows of one type in one format to `out`, as they come — rendered on the caller's
/// thread, or, in [parallel mode](RowWriter::parallel), on other threads in batches and
/// written in order (the same bytes).
pub struct RowWriter<W: Write, R: Row> {
    out: W,
    command: &'static str,
    lines: Lines,
    rows: u64,
    untimed_left_out: u64,
    /// The row's text, kept between rows.
    line: Vec<u8>,
    pipeline: Option<Pipeline<R>>,
    /// How `out` takes a rendered batch's text without a copy ([`RowWriter::giving`]).
    give: Option<Give<W>>,
}

/// A writer's way of taking a whole buffer of text (written in order after everything
/// before it), giving back an empty buffer to render the next batch into.
pub type Give<W> = fn(&mut W, Vec<u8>) -> io::Result<Vec<u8>>;

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
            command,
            lines: Lines {
                format,
                columns,
                keep_untimed: false,
                cell_text: Vec::new(),
                cells: Vec::new(),
                text: String::new(),
            },
            rows: 0,
            untimed_left_out: 0,
            line: Vec::new(),
            pipeline: None,
            give: None,
        })
    }

    /// In [parallel mode](RowWriter::parallel), hand each rendered batch's text to `out`
    /// through `give` instead of copying it into `out` (e.g. a writer that passes buffers to
    /// a writing thread: a listing of gigabytes is then not copied once more on the thread
    /// that produces its rows). The bytes and their order are the same.
    pub fn giving(mut self, give: Give<W>) -> Self {
        self.give = Some(give);
        self
    }

    /// JSON Lines of timeline rows: keep rows without a known time (`datetime` and
    /// `timestamp` null; Timesketch's importer cannot place them) instead of leaving them out.
    pub fn keep_untimed(mut self, keep: bool) -> Self {
        self.lines.keep_untimed = keep;
        self
    }

    /// The warning about the timeline rows left out of JSON Lines for want of a time, if any
    /// were (the rows given so far all written first).
    pub fn untimed_warning(&mut self) -> io::Result<Option<Warning>> {
        self.sync()?;
        Ok((self.untimed_left_out > 0).then(|| {
            Warning::new(
                crate::warning::WarningKind::Time,
                format!(
                    "{} {} rows without a known time were left out of the JSON Lines (Timesketch needs a time on every line; --keep-untimed keeps them, with datetime and timestamp null)",
                    self.untimed_left_out, self.command
                ),
            )
        }))
    }

    /// Rows written so far (in parallel mode, rows given but not yet written are not counted).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Write one row (streamed: nothing is kept; in parallel mode a copy waits in the batch).
    pub fn row(&mut self, r: &R) -> io::Result<()> {
        if let Some(p) = &mut self.pipeline {
            let copy = (p.copy)(r);
            return self.queue(copy);
        }
        self.serial(r)
    }

    /// [`row`](Self::row) for a row the caller gives away: in parallel mode it is moved into
    /// the batch instead of copied.
    pub fn row_owned(&mut self, r: R) -> io::Result<()> {
        if self.pipeline.is_some() {
            return self.queue(r);
        }
        self.serial(&r)
    }

    /// Add `r` to the pending batch (parallel mode), sending the batch when it is full.
    fn queue(&mut self, r: R) -> io::Result<()> {
        let Some(p) = &mut self.pipeline else {
            return self.serial(&r);
        };
        p.batch.push(r);
        p.given += 1;
        if p.batch.len() >= BATCH {
            return self.dispatch();
        }
        Ok(())
    }

    /// Render and write `r` on this thread.
    fn serial(&mut self, r: &R) -> io::Result<()> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let kept = self.lines.render(r, self.rows, &mut line);
        let written = match kept {
            Ok(true) => self.out.write_all(&line).map(|()| self.rows += 1),
            Ok(false) => {
                self.untimed_left_out += 1;
                Ok(())
            }
            Err(e) => Err(e),
        };
        self.line = line;
        written
    }

    /// Send the pending batch to its worker, first writing what is done so that no worker has
    /// more than IN_FLIGHT_PER_WORKER batches outstanding.
    fn dispatch(&mut self) -> io::Result<()> {
        let Some(p) = &mut self.pipeline else {
            return Ok(());
        };
        if p.batch.is_empty() {
            return Ok(());
        }
        if p.workers.is_empty() {
            let lines = self.lines.clone();
            p.workers = (0..p.threads).map(|_| (p.spawn)(lines.clone())).collect();
        }
        let n = p.workers.len() as u64;
        while self
            .pipeline
            .as_ref()
            .is_some_and(|p| p.sent - p.written >= IN_FLIGHT_PER_WORKER * n)
        {
            self.receive_one()?;
        }
        let Some(p) = &mut self.pipeline else {
            return Ok(());
        };
        let next = p
            .spare_batches
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BATCH));
        let batch = std::mem::replace(&mut p.batch, next);
        let mut text = p
            .spare_text
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(batch.len() * 1024));
        text.reserve(p.text_hint.min(MAX_TEXT_HINT));
        let first = p.given - batch.len() as u64;
        let k = (p.sent % n) as usize;
        match p.workers[k]
            .tx
            .as_ref()
            .map(|tx| tx.send((first, batch, text)))
        {
            Some(Ok(())) => {
                p.sent += 1;
                Ok(())
            }
            // The worker is gone (no thread, or it stopped): render the batch here, in order.
            Some(Err(std::sync::mpsc::SendError((_, batch, _)))) => self.fallback(batch),
            None => Err(io::Error::other("no rendering thread")),
        }
    }

    /// A batch no worker took: wait for those before it, then render it on this thread.
    fn fallback(&mut self, batch: Vec<R>) -> io::Result<()> {
        while self.pipeline.as_ref().is_some_and(|p| p.written < p.sent) {
            self.receive_one()?;
        }
        self.pipeline = None;
        for r in &batch {
            self.serial(r)?;
        }
        Ok(())
    }

    /// Write the next batch in order (waiting for it).
    fn receive_one(&mut self) -> io::Result<()> {
        let Some(p) = &mut self.pipeline else {
            return Ok(());
        };
        let n = p.workers.len() as u64;
        let k = (p.written % n) as usize;
        let (text, written, left_out, mut rows) = p.workers[k]
            .rx
            .recv()
            .map_err(|_| io::Error::other("a rendering thread stopped"))??;
        p.written += 1;
        p.text_hint = text.len();
        self.rows += written;
        self.untimed_left_out += left_out;
        let (result, mut text) = match self.give {
            Some(give) => match give(&mut self.out, text) {
                Ok(spare) => (Ok(()), spare),
                Err(e) => (Err(e), Vec::new()),
            },
            None => (self.out.write_all(&text), text),
        };
        text.clear();
        if let Some(p) = &mut self.pipeline {
            // Dropped here, by the thread that made them; the vectors serve again.
            rows.clear();
            p.spare_batches.push(rows);
            p.spare_text.push(text);
        }
        result
    }

    /// Write every row given so far.
    fn sync(&mut self) -> io::Result<()> {
        if self.pipeline.is_none() {
            return Ok(());
        }
        self.dispatch()?;
        while self.pipeline.as_ref().is_some_and(|p| p.written < p.sent) {
            self.receive_one()?;
        }
        Ok(())
    }

    /// End the listing with its warnings (the JSON envelope's `warnings`; the other formats
    /// leave warnings to the caller) and give the writer back.
    pub fn finish(mut self, warnings: &[Warning]) -> io::Result<W> {
        self.sync()?;
        self.pipeline = None;
        if self.lines.format == RowFormat::Json {
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

impl<W: Write, R: Row + Clone + Send + 'static> RowWriter<W, R> {
    /// Render rows on `threads` other threads (0: one fewer than the CPUs available, at most
    /// 4; none on a single CPU), in batches of 1,024 copies, written in the order given: the
    /// same bytes as rendering on the caller's thread, which is then left to produce the rows.
    pub fn parallel(mut self, threads: usize) -> Self {
        let threads = match threads {
            0 if std::env::var_os("ETWDUMP_RENDER_THREADS").is_some() => {
                std::env::var("ETWDUMP_RENDER_THREADS")
                    .ok()
                    .and_then(|t| t.parse::<usize>().ok())
                    .unwrap_or(0)
                    .min(64)
            }
            0 => std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .saturating_sub(1)
                .min(4),
            n => n,
        };
        if threads > 0 {
            self.pipeline = Some(Pipeline {
                threads,
                copy: R::clone,
                spawn: Worker::<R>::spawn,
                workers: Vec::new(),
                batch: Vec::with_capacity(BATCH),
                spare_batches: Vec::new(),
                spare_text: Vec::new(),
                text_hint: 0,
                sent: 0,
                written: 0,
                given: 0,
            });
        }
        self
    }
}

/// `r`'s JSON Lines line (without newline) appended to `line`: its compact object,
/// terminal-safe, with the Timesketch fields appended before the closing brace.
fn jsonl_line<R: Row>(
    line: &mut Vec<u8>,
    r: &R,
    t: &Timesketch<'_>,
    message: &str,
) -> io::Result<()> {
    use super::json::write_str;
    let start = line.len();
    r.write_json(line)?;
    #[cfg(debug_assertions)]
    {
        // The hand-written rows are their serde form, byte for byte (every row the tests
        // render is checked).
        let mut serde_form = Vec::new();
        super::json::write(&mut serde_form, r, true)?;
        assert_eq!(
            String::from_utf8_lossy(&line[start..]),
            String::from_utf8_lossy(&serde_form),
            "Row::write_json differs from the serde form"
        );
    }
    if line.last() == Some(&b'}') {
        line.pop();
        if line.len() - start > 1 {
            line.push(b',');
        }
        line.extend_from_slice(b"\"datetime\":");
        match t.datetime {
            Some(d) => write_str(line, d, true),
            None => line.extend_from_slice(b"null"),
        }
        if R::timeline() {
            line.extend_from_slice(b",\"timestamp\":");
            match t.datetime.and(r.filetime()).map(Timesketch::micros) {
                Some(us) => line.extend_from_slice(itoa::Buffer::new().format(us).as_bytes()),
                None => line.extend_from_slice(b"null"),
            }
        }
        line.extend_from_slice(b",\"timestamp_desc\":");
        write_str(line, t.timestamp_desc, true);
        line.extend_from_slice(b",\"message\":");
        write_str(line, message, true);
        line.push(b'}');
    }
    Ok(())
}

/// Pretty JSON text, terminal-safe.
fn pretty<T: Serialize + ?Sized>(v: &T) -> io::Result<String> {
    let mut t = serde_json::to_vec_pretty(v).map_err(io::Error::other)?;
    super::text::json_terminal_safe(&mut t);
    String::from_utf8(t).map_err(io::Error::other)
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

    /// One JSON value as CSV text: strings as they are, null as empty, others as JSON (the
    /// definition the CSV rows' cells follow).
    pub(crate) fn csv_text(v: &Value) -> String {
        match v {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }

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
        fn timesketch(&self, message: &mut String) -> Timesketch<'_> {
            message.push_str(&format!("m{}", self.a));
            Timesketch {
                datetime: None,
                timestamp_desc: "t",
            }
        }
    }

    /// A timeline row: a time when `ft` is set.
    #[derive(Serialize, Default, Clone)]
    struct Tl {
        n: u32,
        #[serde(skip)]
        ft: Option<u64>,
        #[serde(skip)]
        time: Option<String>,
    }

    fn tl(n: u32, ft: Option<u64>) -> Tl {
        Tl {
            n,
            ft,
            time: ft.map(crate::time::filetime_to_iso8601),
        }
    }

    impl Row for Tl {
        fn table_header() -> String {
            "N".into()
        }
        fn table_line(&self) -> String {
            self.n.to_string()
        }
        fn timesketch(&self, message: &mut String) -> Timesketch<'_> {
            message.push_str(&format!("n{}", self.n));
            Timesketch {
                datetime: self.time.as_deref(),
                timestamp_desc: "t",
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
        let rows = [tl(1, Some(132_583_450_996_604_190)), tl(2, None)];
        let mut w = RowWriter::<_, Tl>::new(Vec::new(), RowFormat::Jsonl, "t").unwrap();
        for r in &rows {
            w.row(r).unwrap();
        }
        assert_eq!(w.untimed_left_out, 1);
        assert!(w
            .untimed_warning()
            .unwrap()
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
        assert!(w.untimed_warning().unwrap().is_none());
        let text = String::from_utf8(w.finish(&[]).unwrap()).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.ends_with(
            "{\"n\":2,\"datetime\":null,\"timestamp\":null,\"timestamp_desc\":\"t\",\"message\":\"n2\"}\n"
        ));
        // Before 1970 (a FILETIME of 1601): negative microseconds, not a wrap.
        assert_eq!(Timesketch::micros(0), -11_644_473_600_000_000);
    }

    /// A row of every shape a listing's columns hold.
    #[derive(Serialize, Default, Clone, Debug)]
    struct Wide {
        s: String,
        o: Option<String>,
        n: Option<i64>,
        f: f64,
        c: char,
        k: Kind,
        v: Vec<u16>,
        nested: Option<std::collections::BTreeMap<String, Option<String>>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
    }

    #[derive(Serialize, Default, Clone, Debug)]
    enum Kind {
        #[default]
        Live,
        Stale,
    }

    impl Row for Wide {
        fn table_header() -> String {
            String::new()
        }
        fn table_line(&self) -> String {
            String::new()
        }
        fn timesketch(&self, _: &mut String) -> Timesketch<'_> {
            Timesketch {
                datetime: None,
                timestamp_desc: "w",
            }
        }
    }

    /// The CSV line as it was defined before the cell writer: `serde_json::to_value`, each
    /// column's value through `csv_text`, then `csv_field`.
    fn csv_reference(r: &Wide, columns: &[String]) -> String {
        let v = serde_json::to_value(r).unwrap();
        let cells: Vec<String> = columns
            .iter()
            .map(|c| super::super::csv::csv_field(&v.get(c).map(csv_text).unwrap_or_default()))
            .collect();
        cells.join(",") + "\n"
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]
        /// Each CSV line is the text the `to_value` definition gives, on random rows.
        #[test]
        fn csv_cells_as_to_value_gave(
            s in ".{0,12}", o in proptest::option::of("[=+@,\"a-z\u{1b}\u{85}\u{202e}-]{0,8}"),
            n in proptest::option::of(proptest::prelude::any::<i64>()),
            f in proptest::prelude::any::<f64>(), c in proptest::prelude::any::<char>(),
            stale in proptest::prelude::any::<bool>(), v in proptest::collection::vec(0u16..999, 0..4),
            nested in proptest::option::of(proptest::collection::btree_map(".{0,4}", proptest::option::of(".{0,4}"), 0..3)),
            skipped in proptest::option::of(0u8..9),
        ) {
            let r = Wide { s, o, n, f, c, k: if stale { Kind::Stale } else { Kind::Live }, v, nested, skipped };
            let cols = columns::<Wide>();
            let text = to_string(std::slice::from_ref(&r), &[], RowFormat::Csv, "w");
            let want = csv_line(&cols) + &csv_reference(&r, &cols);
            proptest::prop_assert_eq!(text, want);
        }
    }

    /// Parallel mode writes the bytes the caller's thread writes, in every format, with 1 to
    /// 3 threads, over several batches (5,000 rows, a third without a time: left out of JSON
    /// Lines and counted, or kept); the counts agree, also after a mid-listing sync.
    #[test]
    fn parallel_rendering_writes_the_same_bytes() {
        let rows: Vec<Tl> = (0..5000u32)
            .map(|n| {
                tl(
                    n,
                    (n % 3 != 0).then_some(132_583_450_996_604_190 + u64::from(n)),
                )
            })
            .collect();
        let run = |format, threads: Option<usize>, keep| {
            let mut w = RowWriter::<_, Tl>::new(Vec::new(), format, "t")
                .unwrap()
                .keep_untimed(keep);
            if let Some(t) = threads {
                w = w.parallel(t);
            }
            for (i, r) in rows.iter().enumerate() {
                w.row(r).unwrap();
                if i == 2500 {
                    // A sync in the middle (what untimed_warning does) keeps the order.
                    w.sync().unwrap();
                }
            }
            let warning = w.untimed_warning().unwrap().map(|w| w.message);
            let n = w.rows();
            (
                String::from_utf8(w.finish(&[]).unwrap()).unwrap(),
                warning,
                n,
            )
        };
        for format in [
            RowFormat::Table,
            RowFormat::Csv,
            RowFormat::Json,
            RowFormat::Jsonl,
        ] {
            for keep in [false, true] {
                let serial = run(format, None, keep);
                for t in 1..=3 {
                    assert_eq!(run(format, Some(t), keep), serial, "{format:?} {t} threads");
                }
            }
        }
        let (_, warning, n) = run(RowFormat::Jsonl, Some(2), false);
        assert_eq!(n, 3333);
        assert!(warning
            .unwrap()
            .starts_with("1667 t rows without a known time"));
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
