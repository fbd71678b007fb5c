//! One renderer for every command (issue 28): the output format is chosen once, from
//! `--format`, as a [`Renderer`]; a model the command holds whole is printed through
//! [`Render`], a listing streamed row by row through [`Row`] ([`Renderer::listing`]; a listing
//! held whole is a `Listing`, which renders through [`Render`] as well).

use super::rows::{Envelope, Row, RowWriter};
use crate::report::RowFormat;
use crate::warning::Warning;
use serde::Serialize;
use std::io::{self, Write};

/// Whether notes ([`crate::warning::Level::Note`]) are printed in text outputs (`-v`); set
/// once by the command line. JSON outputs carry every warning and note whatever it says.
static SHOW_NOTES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Print notes in text outputs too (`-v`).
pub fn show_notes(on: bool) {
    SHOW_NOTES.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `w` is printed in a text output: a warning always, a note with `-v`.
pub fn shown(w: &Warning) -> bool {
    !w.is_note() || SHOW_NOTES.load(std::sync::atomic::Ordering::Relaxed)
}

/// The text line of `w`: `warning: …` or `note: …`, terminal-safe.
pub fn text_line(w: &Warning) -> String {
    format!(
        "{}: {}",
        if w.is_note() { "note" } else { "warning" },
        crate::text::printable(&w.message)
    )
}

/// The line that says how many notes a text output left out (None when none were).
pub fn hidden_notes_line(warnings: &[Warning]) -> Option<String> {
    let hidden = warnings.iter().filter(|w| !shown(w)).count();
    (hidden > 0).then(|| {
        format!(
            "note: {hidden} note{} on how etwdump found what it reports not shown (-v shows them)",
            if hidden == 1 { "" } else { "s" }
        )
    })
}

/// A command's model as text in one of the formats its command offers.
pub trait Render {
    /// Write the model in `format` (a format the command does not offer is never asked).
    fn render(&self, out: &mut dyn Write, format: RowFormat) -> io::Result<()>;

    /// The warnings to print on stderr after the model in `format` (by default none: the
    /// model's text carries them).
    fn stderr_warnings(&self, _format: RowFormat) -> &[Warning] {
        &[]
    }
}

/// The output format of one run, chosen once from `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renderer {
    format: RowFormat,
}

impl Renderer {
    /// A renderer for `format`.
    pub fn new(format: RowFormat) -> Self {
        Renderer { format }
    }

    /// The format it renders.
    pub fn format(&self) -> RowFormat {
        self.format
    }

    /// Warnings on stderr are JSON lines (the JSON Lines output), not `warning:` lines.
    pub fn json_warnings(&self) -> bool {
        self.format == RowFormat::Jsonl
    }

    /// Print a model held whole.
    pub fn model<M: Render + ?Sized>(&self, out: &mut dyn Write, m: &M) -> io::Result<()> {
        m.render(out, self.format)
    }

    /// Start a listing streamed row by row.
    pub fn listing<W: Write, R: Row>(
        &self,
        out: W,
        command: &'static str,
    ) -> io::Result<RowWriter<W, R>> {
        RowWriter::new(out, self.format, command)
    }
}

/// A listing held whole: its rows and warnings, rendered as [`RowWriter`] streams them
/// (warnings on stderr in every format but JSON, whose envelope carries them).
pub(crate) struct Listing<'a, R: Row> {
    pub command: &'static str,
    pub rows: &'a [R],
    pub warnings: &'a [Warning],
}

impl<R: Row> Render for Listing<'_, R> {
    fn render(&self, out: &mut dyn Write, format: RowFormat) -> io::Result<()> {
        let mut w = RowWriter::<_, R>::new(out, format, self.command)?;
        for r in self.rows {
            w.row(r)?;
        }
        w.finish(self.warnings)?;
        Ok(())
    }

    fn stderr_warnings(&self, format: RowFormat) -> &[Warning] {
        if format == RowFormat::Json {
            &[]
        } else {
            self.warnings
        }
    }
}

/// Text printed as it is, each line made safe for a terminal (the tables of whole models).
pub fn table(out: &mut dyn Write, text: &str) -> io::Result<()> {
    write!(out, "{}", crate::text::escape_lines(text))
}

/// A value as terminal-safe pretty JSON and a newline.
pub fn json(out: &mut dyn Write, v: &(impl Serialize + ?Sized)) -> io::Result<()> {
    // Streamed through a small buffer (not built whole, then copied): see
    // `render::json::write_pretty`.
    let mut w = io::BufWriter::with_capacity(1 << 16, out);
    super::json::write_pretty(&mut w, v).map_err(io::Error::from)?;
    w.write_all(b"\n")?;
    w.flush()
}

/// The JSON envelope of a listing held whole, pretty and terminal-safe.
pub fn envelope<T: Serialize>(
    out: &mut dyn Write,
    command: &str,
    records: &[T],
    warnings: &[Warning],
) -> io::Result<()> {
    json(out, &Envelope::new(command, records, warnings))
}
