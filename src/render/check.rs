//! How `check` findings look in a table and in Timesketch's JSON Lines fields (their JSON and
//! CSV forms are their serde fields).

use super::output::{Listing, Render};
use super::rows::{Row, Timesketch};
use super::text::printable;
use crate::report::check::{CheckReport, FindingRow};
use crate::report::RowFormat;

impl Row for FindingRow {
    fn table_header() -> String {
        format!(
            "{:<22} {:<7} {:<40} {:<18}  Evidence / expected",
            "Check", "Level", "Subject", "Address"
        )
    }

    fn table_line(&self) -> String {
        format!(
            "{:<22} {:<7} {:<40} {:<18}  {}\n{:>92}expected: {}",
            self.check,
            self.severity,
            printable(&self.subject),
            self.address.as_deref().unwrap_or("-"),
            printable(&self.evidence),
            "",
            printable(&self.expected)
        )
    }

    fn timesketch(&self, message: &mut String) -> Timesketch<'_> {
        message.push_str(&format!(
            "{} {}: {}",
            self.check, self.subject, self.evidence
        ));
        Timesketch {
            datetime: None,
            timestamp_desc: "ETW tamper check (no time)",
        }
    }
}

impl Render for CheckReport {
    /// JSON: the listing envelope with `checks` ([`CheckReport::json`]); the other formats
    /// list the findings, and the table ends with one summary line per check.
    fn render(&self, out: &mut dyn std::io::Write, format: RowFormat) -> std::io::Result<()> {
        if format == RowFormat::Json {
            return super::output::json(out, &self.json(super::rows::FORMAT_VERSION));
        }
        self.listing().render(out, format)?;
        if format == RowFormat::Table {
            writeln!(out)?;
            for l in crate::report::check::summary(&self.runs) {
                writeln!(out, "{l}")?;
            }
        }
        Ok(())
    }

    /// As the findings' listing: in every format but JSON, whose envelope carries them.
    fn stderr_warnings(&self, format: RowFormat) -> &[crate::warning::Warning] {
        match format {
            RowFormat::Json => &[],
            _ => &self.warnings,
        }
    }
}

impl CheckReport {
    /// The findings as a listing.
    fn listing(&self) -> Listing<'_, FindingRow> {
        Listing {
            command: "check",
            rows: &self.findings,
            warnings: &self.warnings,
        }
    }
}
