//! `etl` as a table of buffers and as JSON.

use super::output::{self, Render};
use crate::report::etl::EtlReport;
use crate::report::RowFormat;
use std::io::{self, Write};

impl Render for EtlReport {
    fn render(&self, out: &mut dyn Write, format: RowFormat) -> io::Result<()> {
        if format == RowFormat::Json {
            return output::json(out, &crate::report::Document::new("etl", self));
        }
        writeln!(
            out,
            "{:>10} {:>8} {:>8} {:>5} {:>8} {:>8}",
            "offset", "size", "saved", "type", "records", "trimmed"
        )?;
        for b in &self.buffers {
            writeln!(
                out,
                "{:>#10x} {:>#8x} {:>#8x} {:>5} {:>8} {:>8}",
                b.offset, b.buffer_size, b.saved_offset, b.buffer_type, b.records, b.trimmed_bytes
            )?;
        }
        if let Some(p) = &self.problem {
            writeln!(out, "warning: {}", crate::text::escape(p))?;
        }
        Ok(())
    }
}
