//! `etwdump providers`: every registered provider from the kernel's GUID table
//! ([`crate::etw::providers`]): one row per registration (a provider no one registered, only
//! enabled ahead of its registration, gets one row without), with the sessions that enable
//! it (logger id, name, level, keywords). By default only providers some session enables;
//! `all` adds the others.

use crate::etw::loggers::list_sessions;
use crate::etw::providers::{self, guid_type_name, EnableInfo, Provider, Registration};
use crate::kernel::context::KernelContext;
use crate::report::hex;
use crate::warning::Warning;
use serde::Serialize;
use std::collections::HashMap;

/// One session enabling a provider (`EnableInfo[slot]`).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct EnabledBy {
    pub slot: u64,
    pub logger_id: u64,
    /// The session's name; None when no live session has that logger id.
    pub session: Option<crate::text::Untrusted>,
    pub level: u64,
    pub match_any_keyword: String,
    pub match_all_keyword: String,
    pub enable_property: String,
}

/// One row: a provider and one of its registrations.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProviderRow {
    pub guid: Option<String>,
    pub name: Option<&'static str>,
    pub guid_entry: String,
    pub guid_type: &'static str,
    pub bucket: u64,
    /// Sessions enabling it (enabled `EnableInfo` slots).
    pub enabled_by: Vec<EnabledBy>,
    /// `ProviderEnableInfo` (the aggregate): IsEnabled, Level, MatchAnyKeyword.
    pub aggregate_enabled: Option<u64>,
    pub aggregate_level: Option<u64>,
    pub aggregate_match_any_keyword: Option<String>,
    /// Registrations of the provider in all (this row shows one of them).
    pub registrations: usize,
    pub registration: Option<String>,
    /// "kernel", "user" or "unknown"; and what told it.
    pub kind: Option<&'static str>,
    pub kind_from: Option<&'static str>,
    pub pid: Option<u64>,
    pub process: Option<crate::text::Untrusted>,
    pub eprocess: Option<String>,
    pub callback: Option<String>,
    pub callback_context: Option<String>,
    pub enable_mask: Option<String>,
    pub warnings: Vec<String>,
}

fn enabled_by(e: &EnableInfo, names: &HashMap<u64, crate::text::Untrusted>) -> EnabledBy {
    EnabledBy {
        slot: e.slot.unwrap_or(0),
        logger_id: e.logger_id,
        session: names.get(&e.logger_id).cloned(),
        level: e.level,
        match_any_keyword: hex(e.match_any_keyword),
        match_all_keyword: hex(e.match_all_keyword),
        enable_property: hex(e.enable_property),
    }
}

fn row(
    p: &Provider,
    r: Option<&Registration>,
    names: &HashMap<u64, crate::text::Untrusted>,
) -> ProviderRow {
    let mut warnings: Vec<String> = p.warnings.iter().map(|w| w.message.clone()).collect();
    if let Some(r) = r {
        warnings.extend(r.warnings.iter().map(|w| w.message.clone()));
    }
    ProviderRow {
        guid: p.guid.clone(),
        name: p.name,
        guid_entry: p.guid_entry.to_string(),
        guid_type: guid_type_name(p.guid_type),
        bucket: p.bucket,
        enabled_by: p.enabled.iter().map(|e| enabled_by(e, names)).collect(),
        aggregate_enabled: p.aggregate.as_ref().map(|a| a.is_enabled),
        aggregate_level: p.aggregate.as_ref().map(|a| a.level),
        aggregate_match_any_keyword: p.aggregate.as_ref().map(|a| hex(a.match_any_keyword)),
        registrations: p.registrations.len(),
        registration: r.map(|r| r.address.to_string()),
        kind: r.map(|r| r.kind.name()),
        kind_from: r.map(|r| r.kind_from),
        pid: r.and_then(|r| r.pid),
        process: r.and_then(|r| r.process.clone()),
        eprocess: r.and_then(|r| r.eprocess).map(|v| v.to_string()),
        callback: r.and_then(|r| r.callback).map(|v| v.to_string()),
        callback_context: r.and_then(|r| r.callback_context).map(|v| v.to_string()),
        enable_mask: r.and_then(|r| r.enable_mask).map(hex),
        warnings,
    }
}

/// The providers and the session names by logger id, as `providers` and `check` use them.
pub fn read(
    ctx: &KernelContext<'_>,
) -> (
    providers::ProviderTable,
    HashMap<u64, crate::text::Untrusted>,
) {
    let list = list_sessions(ctx);
    let silo = list
        .array
        .as_ref()
        .and_then(|a| a.silo_state)
        .or_else(|| crate::etw::routes::resolve_logger_array(ctx).silo_state);
    let names: HashMap<u64, crate::text::Untrusted> = list
        .sessions
        .iter()
        .map(|s| {
            (
                s.logger_id,
                s.name
                    .clone()
                    .unwrap_or_else(|| format!("logger {}", s.logger_id).into()),
            )
        })
        .collect();
    (providers::read(ctx, silo), names)
}

/// Stream the rows (providers in table order, registrations in list order); returns the
/// walk's warnings.
pub fn stream(
    ctx: &KernelContext<'_>,
    all: bool,
    emit: &mut dyn FnMut(&ProviderRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    let (t, names) = read(ctx);
    for p in t.providers.iter().filter(|p| all || p.is_enabled()) {
        if p.registrations.is_empty() {
            emit(&row(p, None, &names))?;
        }
        for r in &p.registrations {
            emit(&row(p, Some(r), &names))?;
        }
    }
    Ok(t.warnings)
}
