//! How `check` findings look in a table and in Timesketch's JSON Lines fields (their JSON and
//! CSV forms are their serde fields).

use super::rows::{Row, Timesketch};
use super::text::printable;
use crate::report::check::FindingRow;

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

    fn timesketch(&self) -> Timesketch {
        Timesketch {
            datetime: None,
            timestamp_desc: "ETW tamper check (no time)",
            message: format!("{} {}: {}", self.check, self.subject, self.evidence),
        }
    }
}
