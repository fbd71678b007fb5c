//! Filters on the per-record listings (issue 29 item 3): `events` by process, thread,
//! provider, event id, kernel hook and UTC time; `cswitch` by process, thread and UTC time
//! (either side of the switch). Applied to each row as it is streamed (no row is held).
//!
//! A row is kept only when every given filter is established for it. A row whose value is not
//! known (no process id in its header, no UTC time, or a time flagged as impossible:
//! `time_flag`) cannot be shown to match and is left out; [`FilterStats::warnings`] says how
//! many were left out that way, so that an empty result is never mistaken for "nothing
//! happened".

use super::cswitch::SwitchRow;
use super::events::EventRow;
use crate::bytes::guid_text;
use crate::etw::provider_names::PROVIDER_NAMES;
use crate::text::printable;
use crate::warning::{Warning, WarningKind};

/// What `events` keeps; an empty list or `None` does not filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    /// Provider GUIDs as rows print them (lower-case, no braces).
    pub providers: Vec<String>,
    pub event_ids: Vec<u16>,
    pub hooks: Vec<u16>,
    /// FILETIME bounds, inclusive.
    pub since: Option<u64>,
    pub until: Option<u64>,
}

/// What the filter did, for the warnings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterStats {
    pub kept: u64,
    pub dropped: u64,
    /// Rows left out because their UTC time is unknown or flagged (time filters given).
    pub unknown_time: u64,
    /// Rows left out because their header has no process id (`--pid` given).
    pub unknown_pid: u64,
    /// Rows left out because their header has no thread id (`--tid` given).
    pub unknown_tid: u64,
}

impl EventFilter {
    /// No filter given.
    pub fn is_empty(&self) -> bool {
        *self == EventFilter::default()
    }

    /// Whether `r` is kept, counted in `stats`.
    pub fn keeps(&self, r: &EventRow, stats: &mut FilterStats) -> bool {
        let keep = self.decide(r, stats);
        if keep {
            stats.kept += 1;
        } else {
            stats.dropped += 1;
        }
        keep
    }

    /// Each given filter matches, does not, or cannot be decided for lack of a value; a row
    /// is counted as left out for an unknown value only when no other filter excludes it.
    fn decide(&self, r: &EventRow, stats: &mut FilterStats) -> bool {
        #[derive(PartialEq)]
        enum M {
            Yes,
            No,
            Unknown,
        }
        fn on<T: PartialEq>(want: &[T], v: Option<T>) -> M {
            match v {
                _ if want.is_empty() => M::Yes,
                None => M::Unknown,
                Some(v) if want.contains(&v) => M::Yes,
                Some(_) => M::No,
            }
        }
        let pid = on(&self.pids, r.pid);
        let tid = on(&self.tids, r.tid);
        let provider = match (self.providers.as_slice(), r.provider.as_deref()) {
            ([], _) => M::Yes,
            (_, None) => M::Unknown,
            (w, Some(p)) if w.iter().any(|x| x == p) => M::Yes,
            _ => M::No,
        };
        let event = on(&self.event_ids, r.event_id);
        // The hook's text is parsed only when hooks are asked for (every row of a listing
        // passes here).
        let hook = if self.hooks.is_empty() {
            M::Yes
        } else {
            on(
                &self.hooks,
                r.hook
                    .as_deref()
                    .and_then(|h| u16::from_str_radix(h.trim_start_matches("0x"), 16).ok()),
            )
        };
        let time = if self.since.is_none() && self.until.is_none() {
            M::Yes
        } else {
            match r.filetime.filter(|_| r.time_flag.is_none()) {
                None => M::Unknown,
                Some(t)
                    if self.since.is_some_and(|s| t < s) || self.until.is_some_and(|u| t > u) =>
                {
                    M::No
                }
                Some(_) => M::Yes,
            }
        };
        // A record without a provider GUID, event id or hook is simply not one of those asked
        // for (its header kind has none); pid, tid and time are facts it lacks.
        let all = [&pid, &tid, &provider, &event, &hook, &time];
        if all.iter().any(|m| **m == M::No)
            || [&provider, &event, &hook].iter().any(|m| **m == M::Unknown)
        {
            return false;
        }
        if time == M::Unknown {
            stats.unknown_time += 1;
        } else if pid == M::Unknown {
            stats.unknown_pid += 1;
        } else if tid == M::Unknown {
            stats.unknown_tid += 1;
        } else {
            return true;
        }
        false
    }
}

/// What `cswitch` keeps: a switch matches `pids`/`tids` when its old or its new thread does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchFilter {
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    /// FILETIME bounds, inclusive.
    pub since: Option<u64>,
    pub until: Option<u64>,
}

impl SwitchFilter {
    /// No filter given.
    pub fn is_empty(&self) -> bool {
        *self == SwitchFilter::default()
    }

    /// Whether `r` is kept, counted in `stats` (as [`EventFilter::keeps`]: a switch whose
    /// process or time is unknown is counted only when nothing else excludes it).
    pub fn keeps(&self, r: &SwitchRow, stats: &mut FilterStats) -> bool {
        let tid = self.tids.is_empty()
            || self.tids.contains(&r.old_tid)
            || r.new_tid.is_some_and(|t| self.tids.contains(&t));
        // Pid: matched by either side; unknown when no side matches and a side is unknown.
        let pid_match = self.pids.is_empty()
            || [r.old_pid, r.new_pid]
                .iter()
                .any(|p| p.is_some_and(|p| self.pids.contains(&p)));
        let pid_unknown = !pid_match && (r.old_pid.is_none() || r.new_pid.is_none());
        let timed = self.since.is_some() || self.until.is_some();
        let time = r.filetime.filter(|_| r.time_flag.is_none());
        let time_no = timed
            && time.is_some_and(|t| {
                self.since.is_some_and(|s| t < s) || self.until.is_some_and(|u| t > u)
            });
        let keep = if !tid || time_no || (!pid_match && !pid_unknown) {
            false
        } else if timed && time.is_none() {
            stats.unknown_time += 1;
            false
        } else if !pid_match {
            stats.unknown_pid += 1;
            false
        } else {
            true
        };
        if keep {
            stats.kept += 1;
        } else {
            stats.dropped += 1;
        }
        keep
    }
}

impl FilterStats {
    /// One warning per kind of row left out for a value it does not have; `rows` names them
    /// (`records`, `switches`).
    pub fn warnings(&self, rows: &str) -> Vec<Warning> {
        let mut w = Vec::new();
        for (n, what, why) in [
            (
                self.unknown_time,
                "--since/--until/--last",
                "have no UTC time (their clock cannot be converted) or a time flagged as impossible",
            ),
            (
                self.unknown_pid,
                "--pid",
                "carry no process id (cswitch: a thread not in the dump's thread list)",
            ),
            (self.unknown_tid, "--tid", "carry no thread id"),
        ] {
            if n > 0 {
                w.push(Warning::new(
                    WarningKind::Other,
                    format!("{n} {rows} left out by {what}: they {why}, so they cannot be shown to match"),
                ));
            }
        }
        w
    }
}

/// Errors in a filter given on the command line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("--provider {0}: neither a GUID nor a provider name etwdump knows (names: those `providers` shows; give the GUID otherwise)")]
    UnknownProvider(String),
    #[error("--hook {0}: neither a hook id (0x0524, 1316) nor a hook name (CONTEXTSWAP, PROCESS_START, ...)")]
    UnknownHook(String),
}

/// The GUIDs `text` names: a GUID (braces optional, any case), or a provider name of the
/// table `providers` uses (exact, case-insensitive; a name can belong to several GUIDs).
pub fn provider_guids(text: &str) -> Result<Vec<String>, FilterError> {
    let t = text.trim().trim_start_matches('{').trim_end_matches('}');
    if let Some(g) = parse_guid(t) {
        return Ok(vec![guid_text(&g)]);
    }
    let named: Vec<String> = PROVIDER_NAMES
        .iter()
        .filter(|(_, n)| n.eq_ignore_ascii_case(text.trim()))
        .map(|(g, _)| guid_text(g))
        .collect();
    if named.is_empty() {
        Err(FilterError::UnknownProvider(printable(text)))
    } else {
        Ok(named)
    }
}

/// A kernel hook id (`0x0524` or decimal) or a hook name as `events` prints it.
pub fn hook_id(text: &str) -> Result<u16, FilterError> {
    let t = text.trim();
    let n = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u16::from_str_radix(h, 16).ok(),
        None => t.parse::<u16>().ok(),
    };
    n.or_else(|| {
        (0..=u16::MAX).find(|&h| {
            crate::decode::hooks::hook_name(h).is_some_and(|name| {
                name.eq_ignore_ascii_case(t)
                    || name
                        .split_once(' ')
                        .is_some_and(|(short, _)| short.eq_ignore_ascii_case(t))
            })
        })
    })
    .ok_or_else(|| FilterError::UnknownHook(printable(text)))
}

/// A GUID `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` as its 16 bytes in memory order.
fn parse_guid(t: &str) -> Option<[u8; 16]> {
    let parts: Vec<&str> = t.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    if parts.len() != 5
        || parts
            .iter()
            .zip(lens)
            .any(|(p, l)| p.len() != l || !p.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return None;
    }
    let d1 = u32::from_str_radix(parts[0], 16).ok()?;
    let d2 = u16::from_str_radix(parts[1], 16).ok()?;
    let d3 = u16::from_str_radix(parts[2], 16).ok()?;
    let mut g = [0u8; 16];
    g[..4].copy_from_slice(&d1.to_le_bytes());
    g[4..6].copy_from_slice(&d2.to_le_bytes());
    g[6..8].copy_from_slice(&d3.to_le_bytes());
    let tail = format!("{}{}", parts[3], parts[4]);
    for (i, b) in g[8..].iter_mut().enumerate() {
        *b = u8::from_str_radix(&tail[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_by_guid_and_name() {
        let g = "54849625-5478-4994-a5ba-3e3b0328c30d";
        assert_eq!(
            provider_guids(&format!("{{{}}}", g.to_uppercase())),
            Ok(vec![g.to_string()])
        );
        // Security-Auditing's GUID, named in the table.
        let named = provider_guids("microsoft-windows-security-auditing").unwrap();
        assert_eq!(
            named,
            vec!["54849625-5478-4994-a5ba-3e3b0328c30d".to_string()]
        );
        assert!(matches!(
            provider_guids("No Such Provider"),
            Err(FilterError::UnknownProvider(_))
        ));
        assert!(provider_guids("5484962-5478-4994-a5ba-3e3b0328c30d").is_err());
    }

    #[test]
    fn hooks_by_id_and_name() {
        assert_eq!(hook_id("0x0524"), Ok(0x0524));
        assert_eq!(hook_id("1316"), Ok(0x0524));
        assert_eq!(hook_id("process_start"), Ok(0x0301));
        assert!(hook_id("NOPE").is_err());
    }

    #[test]
    fn unknown_values_are_left_out_and_counted() {
        let row = EventRow {
            pid: Some(4),
            tid: None,
            filetime: Some(100),
            time_flag: Some("after_dump"),
            event_id: Some(7036),
            provider: Some("54849625-5478-4994-a5ba-3e3b0328c30d".into()),
            ..EventRow::default()
        };
        let mut s = FilterStats::default();
        let f = EventFilter {
            pids: vec![4],
            ..EventFilter::default()
        };
        assert!(f.keeps(&row, &mut s));
        let f = EventFilter {
            tids: vec![4],
            ..EventFilter::default()
        };
        assert!(!f.keeps(&row, &mut s));
        // A flagged time cannot match a time filter, however close it is.
        let f = EventFilter {
            since: Some(0),
            ..EventFilter::default()
        };
        assert!(!f.keeps(&row, &mut s));
        let ok = EventRow {
            time_flag: None,
            ..row.clone()
        };
        assert!(f.keeps(&ok, &mut s));
        let f = EventFilter {
            since: Some(101),
            ..EventFilter::default()
        };
        assert!(!f.keeps(&ok, &mut s));
        let f = EventFilter {
            event_ids: vec![7036],
            providers: provider_guids("Microsoft-Windows-Security-Auditing").unwrap(),
            ..EventFilter::default()
        };
        assert!(f.keeps(&ok, &mut s));
        assert_eq!(
            s,
            FilterStats {
                kept: 3,
                dropped: 3,
                unknown_time: 1,
                unknown_pid: 0,
                unknown_tid: 1,
            }
        );
        assert_eq!(s.warnings("records").len(), 2);
    }
}
