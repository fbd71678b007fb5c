//! `etwdump check`: the tamper checks of [`crate::etw::tamper`] over the dump's sessions and
//! provider tables: one row per finding, and per check what was examined and what limited it.

use crate::etw::loggers::list_sessions;
use crate::etw::tamper::{self, CheckRun, Finding};
use crate::kernel::context::KernelContext;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// One finding, as listed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FindingRow {
    pub check: &'static str,
    pub severity: &'static str,
    pub subject: String,
    pub address: Option<String>,
    pub field: Option<String>,
    pub logger_id: Option<u64>,
    pub evidence: String,
    pub expected: String,
}

impl From<&Finding> for FindingRow {
    fn from(f: &Finding) -> FindingRow {
        FindingRow {
            check: f.check,
            severity: match f.severity {
                tamper::Severity::Alert => "alert",
                tamper::Severity::Notice => "notice",
            },
            subject: f.subject.clone(),
            address: f.address.map(|a| a.to_string()),
            field: f.field.clone(),
            logger_id: f.logger_id,
            evidence: f.evidence.clone(),
            expected: f.expected.clone(),
        }
    }
}

/// The checks' result: findings, runs, and the warnings of the walks they rest on.
pub struct CheckReport {
    pub findings: Vec<FindingRow>,
    pub runs: Vec<CheckRun>,
    pub warnings: Vec<Warning>,
}

/// The JSON of `check`: the listing envelope (docs/output-contract.md) with each check's
/// run (`checks`: examined, findings, limit) between the records and the warnings.
#[derive(Serialize)]
pub struct CheckJson<'a> {
    pub format_version: u32,
    pub command: &'static str,
    pub records: &'a [FindingRow],
    pub checks: &'a [CheckRun],
    pub warnings: &'a [Warning],
}

impl CheckReport {
    /// The JSON model, in the output contract's `format_version`.
    pub fn json(&self, format_version: u32) -> CheckJson<'_> {
        CheckJson {
            format_version,
            command: "check",
            records: &self.findings,
            checks: &self.runs,
            warnings: &self.warnings,
        }
    }
}

/// Run every check.
pub fn run(ctx: &KernelContext<'_>) -> CheckReport {
    let list = list_sessions(ctx);
    let (table, _) = crate::report::providers::read(ctx);
    let t = tamper::check(ctx, &list.sessions, &table);
    let mut warnings = list.warnings.clone();
    warnings.extend(table.warnings.iter().cloned());
    // A check that could not run in full says so among the warnings too (JSON consumers
    // read one list).
    for r in &t.runs {
        if let Some(l) = &r.limit {
            warnings.push(Warning::new(
                WarningKind::Unknowable,
                format!("check {}: {l}", r.check),
            ));
        }
    }
    CheckReport {
        findings: t.findings.iter().map(FindingRow::from).collect(),
        runs: t.runs,
        warnings,
    }
}

/// "check  examined  findings  limit" lines for the table output's footer.
pub fn summary(runs: &[CheckRun]) -> Vec<String> {
    runs.iter()
        .map(|r| {
            format!(
                "{:<24} {:>6} examined {:>4} finding(s){}",
                r.check,
                r.examined,
                r.findings,
                r.limit
                    .as_deref()
                    .map(|l| format!("  (limited: {l})"))
                    .unwrap_or_default()
            )
        })
        .collect()
}
