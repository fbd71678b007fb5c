//! `overview`: what a dump holds of ETW on one screen — the dump, its sessions with the
//! buffers found for each, and each CPU's last context switches before the dump, with UTC
//! times and process names; warnings counted by kind (the other commands give them in full).
//! Built from the same models as `info`, `sessions` and `cswitch`.

use crate::etw::source::EtwSource;
use crate::kernel::context::KernelContext;
use crate::report::cswitch::SwitchRow;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// Most switches kept per CPU (`--switches` is capped here).
pub(crate) const MAX_SWITCHES_PER_CPU: usize = 1000;

/// The dump in one line's worth of facts.
#[derive(Debug, Serialize)]
pub struct DumpFacts {
    /// Crash-dump type name, or the memory image's container.
    pub kind: String,
    pub arch: &'static str,
    pub build: u32,
    pub processors: u32,
    /// ISO-8601 UTC.
    pub system_time: String,
    /// `pdb`, `isf`, `builtin` or `none`, and whether they match the dump's kernel.
    pub symbols: String,
}

/// One session as the overview shows it.
#[derive(Debug, Serialize)]
pub struct OverviewSession {
    pub logger_id: Option<u64>,
    pub name: Option<crate::text::Untrusted>,
    pub clock: Option<String>,
    pub buffer_size: Option<u64>,
    /// Buffers (or saved windows) found for it.
    pub buffers_found: usize,
    pub events_lost: Option<u64>,
    pub start_time: Option<String>,
    pub log_file: Option<crate::text::Untrusted>,
}

/// The overview of one dump.
#[derive(Debug, Serialize)]
pub struct Overview {
    pub dump: DumpFacts,
    pub sessions: Vec<OverviewSession>,
    /// Context switches decoded, one per switch (a switch traced by several sessions counts
    /// once: `cswitch`'s rows).
    pub switches: u64,
    /// Records per source (`pending`, `batch`, `event`): a switch seen by an event and a
    /// pending block counts in both.
    pub switches_by_source: BTreeMap<&'static str, u64>,
    /// The last switches of each CPU before the dump, oldest first: the newest rows with a
    /// UTC time that fits the dump (pending switches included: `cswitch` lists each CPU in UTC
    /// order); rows without a UTC time or flagged `after_dump` / `before_boot` cannot be
    /// placed and are left out.
    pub last_switches: BTreeMap<u64, Vec<SwitchRow>>,
    /// Warnings by kind (`etwdump sessions` and `cswitch` list them).
    pub warnings_by_kind: BTreeMap<WarningKind, usize>,
    #[serde(skip)]
    pub warnings: Vec<Warning>,
}

impl Overview {
    /// The overview of `ctx`'s dump, keeping the last `per_cpu` switches of each CPU (at most
    /// `MAX_SWITCHES_PER_CPU`).
    pub fn build(ctx: &KernelContext<'_>, per_cpu: usize) -> std::io::Result<Overview> {
        let per_cpu = per_cpu.min(MAX_SWITCHES_PER_CPU);
        let info = crate::report::info::info_with(ctx);
        let dump = DumpFacts {
            kind: info
                .memory
                .format
                .map_or_else(|| info.dump_type.name.to_string(), |f| f.to_string()),
            arch: info.arch,
            build: info.windows.build,
            processors: info.processors,
            system_time: info.system_time.clone(),
            symbols: {
                use crate::kernel::context::SymbolMatch;
                let how = match &info.symbols.matched {
                    SymbolMatch::NoSymbols => match info.symbols.builtin_era {
                        Some(_) => "built-in layouts".to_string(),
                        None => "no layouts".to_string(),
                    },
                    SymbolMatch::Rsds => "matched by GUID and age".to_string(),
                    SymbolMatch::SymbolOffsets { checks } => format!(
                        "matched by {} of {} global RVAs",
                        checks.iter().filter(|c| c.agrees).count(),
                        checks.len()
                    ),
                    SymbolMatch::Unverified { reason } => format!("not verified: {reason}"),
                };
                format!("{}, {how}", info.symbols.source)
            },
        };
        let src = EtwSource::open(ctx, None);
        let mut warnings = src.warnings().to_vec();
        if let Some(l) = src.memory() {
            warnings.extend(l.warnings.iter().cloned());
        }
        let sessions = src
            .sessions()
            .iter()
            .map(|s| {
                let c = s.context.as_ref();
                OverviewSession {
                    logger_id: s.logger_id,
                    name: s.name().cloned(),
                    clock: c.and_then(|c| c.clock_type_name).map(str::to_string),
                    buffer_size: c.and_then(|c| c.buffer_size),
                    buffers_found: s.units,
                    events_lost: c.and_then(|c| c.events_lost),
                    start_time: c.and_then(|c| c.start_time.clone()),
                    log_file: c.and_then(|c| c.log_file.clone()),
                }
            })
            .collect();
        let mut last: BTreeMap<u64, VecDeque<SwitchRow>> = BTreeMap::new();
        let mut by_source: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut switches = 0u64;
        let w = crate::report::cswitch::stream_from(ctx, src, None, None, &mut |r| {
            switches += 1;
            for s in &r.sources {
                *by_source.entry(s.source).or_default() += 1;
            }
            if per_cpu > 0 && r.filetime.is_some() && r.time_flag.is_none() {
                let q = last.entry(r.cpu.unwrap_or(u64::MAX)).or_default();
                if q.len() == per_cpu {
                    q.pop_front();
                }
                q.push_back(r.clone());
            }
            Ok(())
        })?;
        for x in w {
            if !warnings.iter().any(|y| y.message == x.message) {
                warnings.push(x);
            }
        }
        let mut warnings_by_kind = BTreeMap::new();
        for w in &warnings {
            *warnings_by_kind.entry(w.kind).or_default() += 1;
        }
        Ok(Overview {
            dump,
            sessions,
            switches,
            switches_by_source: by_source,
            last_switches: last
                .into_iter()
                .map(|(c, q)| (c, q.into_iter().collect()))
                .collect(),
            warnings_by_kind,
            warnings,
        })
    }
}
