//! Typed warnings: what went wrong or looks odd, with the session, slot, CPU, address and
//! field it concerns, kept in the models and carried machine-readably by the JSON and JSON
//! Lines outputs (docs/output-contract.md). The message is the human text printed on stderr.

use crate::addr::VirtAddr;
use serde::Serialize;
use std::fmt;

/// What a warning is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// Bytes needed are not in the dump (a page or table missing, the dump cut short).
    Unreadable,
    /// A value odd for the object it belongs to; the object is still reported.
    Anomaly,
    /// A structure, route, symbol or layout could not be located.
    NotFound,
    /// A walk stopped at its bound or at a cycle.
    Bound,
    /// Two sources disagree (routes, globals): this can mean tampering.
    Conflict,
    /// A clock could not be converted, or converted times do not fit the dump.
    Time,
    /// A record, batch or block did not decode completely.
    Decode,
    /// A value was inferred from other evidence (the message says how).
    Inferred,
    /// A layout, offset or enum limit is used that no evidence in the dump confirmed (the
    /// message says what it is and what that means for the output).
    Unconfirmed,
    /// What this kind of dump cannot tell.
    Unknowable,
    /// What etwdump does not do (an unsupported build or format, a compressed buffer).
    Unsupported,
    /// A bound on the output was reached (rows or files left out).
    OutputBound,
    /// Not classified yet.
    Other,
}

impl WarningKind {
    /// The level a problem of this kind has unless its site says otherwise: `inferred` (a
    /// value found from other evidence, the message saying how) is a [`Level::Note`], every
    /// other kind changes what the output means or how far it goes ([`Level::Warning`]).
    pub fn default_level(self) -> Level {
        match self {
            WarningKind::Inferred => Level::Note,
            _ => Level::Warning,
        }
    }
}

/// Whether a user must know a problem to read the output right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// It changes what the output means or how far it goes (data missing, a value unknown or
    /// unconfirmed, sources that disagree): printed by default.
    Warning,
    /// How etwdump found something (a value inferred from other evidence, a route taken, a
    /// duplicate left out): printed with `-v`; kept in every JSON output.
    Note,
}

/// One warning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub kind: WarningKind,
    /// Printed by default (`warning`) or only with `-v` (`note`).
    pub level: Level,
    /// The session (logger id) it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logger_id: Option<u64>,
    /// The logger-array slot it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<u64>,
    /// The processor it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u64>,
    /// The address of the object or field it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<VirtAddr>,
    /// The structure member it concerns (`_WMI_LOGGER_CONTEXT.BufferSize`, `GlobalList`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The human text (printed on stderr as `warning: <message>`).
    pub message: String,
}

impl Warning {
    /// A warning of `kind`.
    pub fn new(kind: WarningKind, message: impl Into<String>) -> Warning {
        Warning {
            kind,
            level: kind.default_level(),
            logger_id: None,
            slot: None,
            cpu: None,
            address: None,
            field: None,
            message: message.into(),
        }
    }

    /// A note: how etwdump found something, not needed to read the output right.
    pub fn note(mut self) -> Self {
        self.level = Level::Note;
        self
    }

    /// A note ([`Level::Note`]).
    pub fn is_note(&self) -> bool {
        self.level == Level::Note
    }

    /// About logger `id`.
    pub fn logger(mut self, id: u64) -> Self {
        self.logger_id = Some(id);
        self
    }

    /// About logger-array slot `slot`.
    pub fn slot(mut self, slot: u64) -> Self {
        self.slot = Some(slot);
        self
    }

    /// About CPU `cpu`.
    pub fn cpu(mut self, cpu: u64) -> Self {
        self.cpu = Some(cpu);
        self
    }

    /// About the object at `address`.
    pub fn at(mut self, address: VirtAddr) -> Self {
        self.address = Some(address);
        self
    }

    /// About the field `field` (`STRUCT.Field`).
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// The same warning about logger `id` with `prefix` before its message (a lower layer's
    /// warning placed in a session's context), keeping its kind and fields.
    pub(crate) fn in_logger(mut self, id: u64) -> Self {
        if self.logger_id.is_none() {
            self.logger_id = Some(id);
            self.message = format!("logger {id}: {}", self.message);
        }
        self
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Warnings serialized as their messages only (models whose JSON has always carried their
/// warnings as text: a session's, a consumer's).
pub(crate) fn serialize_messages<S: serde::Serializer>(
    list: &[Warning],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|w| &w.message))
}

/// Push `w` unless an equal warning is already there (many slots or blocks can raise the same).
pub(crate) fn push_once(list: &mut Vec<Warning>, w: Warning) {
    if !list.contains(&w) {
        list.push(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_leaves_out_what_is_not_known() {
        let w = Warning::new(WarningKind::Anomaly, "BufferSize is odd")
            .logger(3)
            .at(VirtAddr::new(0xFFFF_8000_0000_1000))
            .field("_WMI_LOGGER_CONTEXT.BufferSize");
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::json!({
                "kind": "anomaly",
                "level": "warning",
                "logger_id": 3,
                "address": "0xffff800000001000",
                "field": "_WMI_LOGGER_CONTEXT.BufferSize",
                "message": "BufferSize is odd"
            })
        );
        assert_eq!(w.to_string(), "BufferSize is odd");
        let n = Warning::new(
            WarningKind::Inferred,
            "clock 1 inferred from its timestamps",
        );
        assert_eq!(serde_json::to_value(&n).unwrap()["level"], "note");
        assert!(n.is_note() && !Warning::new(WarningKind::Time, "t").is_note());
        assert!(Warning::new(WarningKind::Anomaly, "a").note().is_note());
        let w = Warning::new(WarningKind::Decode, "x").in_logger(2);
        assert_eq!(
            (w.kind, w.logger_id, w.message.as_str()),
            (WarningKind::Decode, Some(2), "logger 2: x")
        );
    }
}
