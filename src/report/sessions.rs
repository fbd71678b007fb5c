//! `etwdump sessions`: the ETW sessions the dump shows, from its ETW source: a memory dump's
//! logger contexts (and the slots whose pointer was rejected), or what a triage dump saved at
//! bug check.

use crate::etw::loggers::{RejectedSlot, Session, SessionList};
use crate::etw::source::{EtwSource, SourceSession};
use crate::kernel::context::KernelContext;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// One record of `sessions --format json`: a session read from its logger context, a session
/// known from what a triage dump saved, or a slot whose pointer was rejected.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SlotRecord<'a> {
    Session(&'a Session),
    SavedSession(SavedSession),
    RejectedSlot(&'a RejectedSlot),
}

/// A session known from a triage dump (no logger context: only what the kernel saved).
#[derive(Clone, Debug, Serialize)]
pub struct SavedSession {
    /// Null for an error-log tail whose logger cannot be told.
    pub logger_id: Option<u64>,
    pub name: Option<crate::text::Untrusted>,
    /// Where it is known from: `secondary_data`, `current_buffer` or `errlog_tail`.
    pub source: &'static str,
    pub logger_mode: Option<u64>,
    pub logger_mode_flags: Vec<String>,
    pub clock_type: Option<u64>,
    pub clock_type_name: Option<String>,
    pub buffer_size: Option<u64>,
    pub start_time: Option<String>,
    pub start_time_raw: Option<u64>,
    /// Buffers (or windows) recovered.
    pub buffers: usize,
}

impl SavedSession {
    fn of(s: &SourceSession) -> SavedSession {
        let c = s.context.as_ref();
        SavedSession {
            logger_id: s.logger_id,
            name: c.and_then(|c| c.name.clone()),
            source: s.source,
            logger_mode: c.and_then(|c| c.logger_mode),
            logger_mode_flags: c.map_or_else(Vec::new, |c| c.logger_mode_flags.clone()),
            clock_type: c.and_then(|c| c.clock_type),
            clock_type_name: match (s.source, c.and_then(|c| c.clock_type_name)) {
                (_, Some(n)) => Some(n.to_string()),
                ("current_buffer", None) => Some("unknown".into()),
                _ => None,
            },
            buffer_size: c.and_then(|c| c.buffer_size),
            start_time: c.and_then(|c| c.start_time.clone()),
            start_time_raw: c.and_then(|c| c.start_time_raw),
            buffers: s.units,
        }
    }
}

/// The sessions of one dump.
pub struct Sessions<'c, 'd> {
    src: EtwSource<'c, 'd>,
    /// Memory: the session list's warnings; triage: what reading the saved data met, and what
    /// cannot be known.
    pub warnings: Vec<Warning>,
}

impl<'c, 'd> Sessions<'c, 'd> {
    /// The sessions of `ctx`'s dump, from its ETW source.
    pub fn open(ctx: &'c KernelContext<'d>) -> Self {
        let src = EtwSource::open_sessions(ctx);
        let mut warnings = src.memory().map_or_else(Vec::new, |l| l.warnings.clone());
        warnings.extend(src.warnings().iter().cloned());
        if let Some(what) = src.unknowable() {
            warnings.push(Warning::new(
                WarningKind::Unknowable,
                format!("not known: {what}"),
            ));
        }
        Sessions { src, warnings }
    }

    /// A memory dump's session list (logger array, sessions, rejected slots).
    pub fn list(&self) -> Option<&SessionList> {
        self.src.memory()
    }

    /// A triage dump's sessions (empty for a memory dump).
    pub fn saved(&self) -> Vec<SavedSession> {
        if self.list().is_some() {
            return Vec::new();
        }
        self.src.sessions().iter().map(SavedSession::of).collect()
    }

    /// The JSON records: every session, then every rejected slot.
    pub fn records(&self) -> Vec<SlotRecord<'_>> {
        match self.list() {
            Some(list) => list
                .sessions
                .iter()
                .map(SlotRecord::Session)
                .chain(list.rejected.iter().map(SlotRecord::RejectedSlot))
                .collect(),
            None => self
                .saved()
                .into_iter()
                .map(SlotRecord::SavedSession)
                .collect(),
        }
    }
}
