//! `etwdump sessions`: the ETW sessions active when the dump was taken.

use crate::etw::loggers::{RejectedSlot, Session, SessionList};
use serde::Serialize;

/// One record of `sessions --format json`: a session, or a slot whose pointer was rejected.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SlotRecord<'a> {
    Session(&'a Session),
    RejectedSlot(&'a RejectedSlot),
}

/// The JSON records: every session, then every rejected slot.
pub fn records(list: &SessionList) -> Vec<SlotRecord<'_>> {
    list.sessions
        .iter()
        .map(SlotRecord::Session)
        .chain(list.rejected.iter().map(SlotRecord::RejectedSlot))
        .collect()
}
