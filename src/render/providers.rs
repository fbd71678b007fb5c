//! How `providers` rows look in a table and in Timesketch's JSON Lines fields (their JSON and
//! CSV forms are their serde fields).

use super::rows::{Row, Timesketch};
use super::text::printable;
use crate::report::providers::ProviderRow;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

impl ProviderRow {
    /// "5 EventLog-System L4 any 0x8000000000000000" per enabling session, or "-".
    fn sessions_text(&self) -> String {
        if self.enabled_by.is_empty() {
            return "-".into();
        }
        self.enabled_by
            .iter()
            .map(|e| {
                format!(
                    "{} {} L{} any {}{}",
                    e.logger_id,
                    crate::text::shown_or(e.session.as_ref(), "(no such session)"),
                    e.level,
                    e.match_any_keyword,
                    if e.match_all_keyword == "0x0" {
                        String::new()
                    } else {
                        format!(" all {}", e.match_all_keyword)
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// "kernel cb 0x…" / "user 1234 svchost.exe" / "-".
    fn registrant(&self) -> String {
        match self.kind {
            None => "(no registration)".into(),
            Some("kernel") => format!("kernel {}", self.callback.as_deref().unwrap_or("-")),
            Some("user") => format!(
                "{} {}",
                opt(self.pid),
                crate::text::shown_or(self.process.as_ref(), "-")
            ),
            Some(k) => k.to_string(),
        }
    }
}

impl Row for ProviderRow {
    fn table_header() -> String {
        format!(
            "{:<38} {:<40} {:<18} {:<28} {:>5}  Enabled by (logger name level keywords) / notes",
            "GUID", "Name", "Registration", "Registrant", "Mask"
        )
    }

    fn table_line(&self) -> String {
        let mut notes = vec![self.sessions_text()];
        notes.extend(
            self.warnings
                .iter()
                .map(|w| format!("warning: {}", printable(w))),
        );
        format!(
            "{:<38} {:<40} {:<18} {:<28} {:>5}  {}",
            self.guid
                .as_deref()
                .map_or_else(|| "(unreadable)".into(), |g| format!("{{{g}}}")),
            self.name.unwrap_or("-"),
            self.registration.as_deref().unwrap_or("-"),
            self.registrant(),
            self.enable_mask.as_deref().unwrap_or("-"),
            notes.join(", ")
        )
    }

    fn timesketch(&self, message: &mut String) -> Timesketch<'_> {
        message.push_str(&format!(
            "provider {} {} registered by {}; enabled by {}",
            self.guid.as_deref().unwrap_or("-"),
            self.name.unwrap_or("-"),
            self.registrant(),
            self.sessions_text()
        ));
        Timesketch {
            datetime: None,
            timestamp_desc: "ETW provider registration (no time)",
        }
    }
}
