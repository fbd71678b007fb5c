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

impl DumpFacts {
    /// The facts `info` gives of the dump, in one line's worth.
    pub fn of(info: &crate::report::info::InfoReport) -> DumpFacts {
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
        DumpFacts {
            kind: info
                .memory
                .format
                .map_or_else(|| info.dump_type.name.to_string(), |f| f.to_string()),
            arch: info.arch,
            build: info.windows.build,
            processors: info.processors,
            system_time: info.system_time.clone(),
            symbols: format!("{}, {how}", info.symbols.source),
        }
    }
}

/// The last switches of each CPU in a listing, oldest first, at most `per_cpu` each: the
/// rows with a UTC time that fits the dump (rows without one, or flagged `after_dump` /
/// `before_boot`, cannot be placed and are not kept). Fed one row at a time, in `cswitch`'s
/// order; holds at most `per_cpu` rows per CPU, whatever the listing's length.
pub struct LastSwitches {
    per_cpu: usize,
    lanes: BTreeMap<u64, VecDeque<SwitchRow>>,
    /// Per CPU, the rows that were kept and later let go for newer ones.
    dropped: BTreeMap<u64, u64>,
}

impl LastSwitches {
    /// Keep the last `per_cpu` placeable switches of each CPU.
    pub fn new(per_cpu: usize) -> Self {
        LastSwitches {
            per_cpu,
            lanes: BTreeMap::new(),
            dropped: BTreeMap::new(),
        }
    }

    /// One row of the listing.
    pub fn push(&mut self, r: &SwitchRow) {
        if self.per_cpu == 0 || r.filetime.is_none() || r.time_flag.is_some() {
            return;
        }
        let cpu = r.cpu.unwrap_or(u64::MAX);
        let q = self.lanes.entry(cpu).or_default();
        if q.len() == self.per_cpu {
            q.pop_front();
            *self.dropped.entry(cpu).or_default() += 1;
        }
        q.push_back(r.clone());
    }

    /// Placeable rows let go for newer ones (0: every placeable row is kept).
    pub fn dropped(&self) -> u64 {
        self.dropped.values().sum()
    }

    /// The rows kept, per CPU (a row without a CPU under `u64::MAX`).
    pub fn into_lanes(self) -> BTreeMap<u64, Vec<SwitchRow>> {
        self.lanes
            .into_iter()
            .map(|(c, q)| (c, q.into_iter().collect()))
            .collect()
    }

    /// The rows kept over one time window that every CPU covers whole, CPU by CPU in time
    /// order (a chart's rows): when a CPU let rows go, the window starts at the first time it
    /// kept, and every CPU's rows before that are left out too. Returns the rows and the
    /// window's start (None when nothing was let go: every placeable row).
    pub fn window(self) -> (Vec<SwitchRow>, Option<u64>) {
        let start = self
            .lanes
            .iter()
            .filter(|(cpu, _)| self.dropped.contains_key(cpu))
            .filter_map(|(_, q)| q.front().and_then(|r| r.filetime))
            .max();
        let rows = self
            .lanes
            .into_values()
            .flatten()
            .filter(|r| start.is_none_or(|s| r.filetime.is_some_and(|t| t >= s)))
            .collect();
        (rows, start)
    }
}

/// An overview being built: the dump's facts and sessions first, then the switches of the
/// `cswitch` listing one by one ([`OverviewBuilder::switch`]), then the listing's warnings.
pub struct OverviewBuilder {
    dump: DumpFacts,
    sessions: Vec<OverviewSession>,
    warnings: Vec<Warning>,
    last: LastSwitches,
    by_source: BTreeMap<&'static str, u64>,
    switches: u64,
}

impl OverviewBuilder {
    /// The facts of `ctx`'s dump and the sessions of `src` (the source the switches will be
    /// streamed from), keeping the last `per_cpu` switches of each CPU (at most
    /// `MAX_SWITCHES_PER_CPU`).
    pub fn new(ctx: &KernelContext<'_>, src: &EtwSource<'_, '_>, per_cpu: usize) -> Self {
        let info = crate::report::info::info_with(ctx);
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
        OverviewBuilder {
            dump: DumpFacts::of(&info),
            sessions,
            warnings,
            last: LastSwitches::new(per_cpu.min(MAX_SWITCHES_PER_CPU)),
            by_source: BTreeMap::new(),
            switches: 0,
        }
    }

    /// One row of the `cswitch` listing (in its order).
    pub fn switch(&mut self, r: &SwitchRow) {
        self.switches += 1;
        for s in &r.sources {
            *self.by_source.entry(s.source).or_default() += 1;
        }
        self.last.push(r);
    }

    /// The overview, with the listing's warnings (those not already given by the sessions).
    pub fn finish(self, listing_warnings: Vec<Warning>) -> Overview {
        let mut warnings = self.warnings;
        for x in listing_warnings {
            if !warnings.iter().any(|y| y.message == x.message) {
                warnings.push(x);
            }
        }
        let mut warnings_by_kind = BTreeMap::new();
        for w in &warnings {
            *warnings_by_kind.entry(w.kind).or_default() += 1;
        }
        Overview {
            dump: self.dump,
            sessions: self.sessions,
            switches: self.switches,
            switches_by_source: self.by_source,
            last_switches: self.last.into_lanes(),
            warnings_by_kind,
            warnings,
        }
    }
}

impl Overview {
    /// The overview of `ctx`'s dump, keeping the last `per_cpu` switches of each CPU (at most
    /// `MAX_SWITCHES_PER_CPU`).
    pub fn build(ctx: &KernelContext<'_>, per_cpu: usize) -> std::io::Result<Overview> {
        let src = EtwSource::open(ctx, None);
        let mut b = OverviewBuilder::new(ctx, &src, per_cpu);
        let w = crate::report::cswitch::stream_from(ctx, src, None, None, &mut |r| {
            b.switch(&r);
            Ok(())
        })?;
        Ok(b.finish(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cpu: u64, t: u64) -> SwitchRow {
        SwitchRow {
            cpu: Some(cpu),
            filetime: Some(t),
            timestamp: t,
            ..SwitchRow::default()
        }
    }

    /// Each CPU keeps its last `per_cpu` placeable rows; the window every CPU covers starts
    /// at the latest first time of a CPU that let rows go, and cuts the others' rows before it.
    #[test]
    fn last_switches_and_their_common_window() {
        let mut l = LastSwitches::new(3);
        // CPU 0: 10..=15 (keeps 13, 14, 15); CPU 1: 5, 12, 20 (keeps all); CPU 2: 1..=4 and an
        // unplaceable row (keeps 2, 3, 4).
        for t in 10..=15 {
            l.push(&row(0, t));
        }
        for t in [5, 12, 20] {
            l.push(&row(1, t));
        }
        for t in 1..=4 {
            l.push(&row(2, t));
        }
        let mut flagged = row(2, 30);
        flagged.time_flag = Some("after_dump");
        l.push(&flagged);
        l.push(&SwitchRow {
            cpu: Some(2),
            ..SwitchRow::default()
        });
        assert_eq!(l.dropped(), 4);
        let (rows, start) = l.window();
        // CPU 0 let go from 13 on, CPU 2 from 2 on: the window starts at 13.
        assert_eq!(start, Some(13));
        let kept: Vec<(Option<u64>, u64)> = rows.iter().map(|r| (r.cpu, r.timestamp)).collect();
        assert_eq!(
            kept,
            [(Some(0), 13), (Some(0), 14), (Some(0), 15), (Some(1), 20)]
        );
        // Nothing let go: every placeable row, no window.
        let mut l = LastSwitches::new(5);
        for t in [5, 12, 20] {
            l.push(&row(1, t));
        }
        assert_eq!(l.dropped(), 0);
        let (rows, start) = l.window();
        assert_eq!((rows.len(), start), (3, None));
    }
}
