//! `extract` as the list of files it wrote.

use super::output::Render;
use crate::report::extract::Manifest;
use crate::report::RowFormat;
use crate::warning::Warning;
use std::io::{self, Write};
use std::path::Path;

/// The files an extraction wrote into `dir`: one line per session's .etl file (buffers,
/// records, bytes, SHA-256), then manifest.json; warnings on stderr.
pub struct Written<'a> {
    pub dir: &'a Path,
    pub manifest: &'a Manifest,
}

impl Render for Written<'_> {
    fn render(&self, out: &mut dyn Write, _format: RowFormat) -> io::Result<()> {
        for s in &self.manifest.sessions {
            writeln!(
                out,
                "{}: {} buffers, {} records, {} bytes, sha256 {}",
                self.dir.join(&s.file).display(),
                s.buffers,
                s.records,
                s.bytes,
                s.sha256.as_deref().unwrap_or("not computed (--no-hash)")
            )?;
        }
        writeln!(out, "{}", self.dir.join("manifest.json").display())
    }

    fn stderr_warnings(&self, _format: RowFormat) -> &[Warning] {
        &self.manifest.warnings
    }
}
