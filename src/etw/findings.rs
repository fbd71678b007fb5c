//! What the tamper checks report (`etw::tamper`, `etw::userpatch`): each check's findings and
//! whether it could run.

use crate::addr::VirtAddr;
use serde::Serialize;

/// The checks' ids (a crate of their own, which the forge shares).
pub use etwdump_check_ids::CheckId;

/// How sure a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// What a clean kernel does not hold.
    Alert,
    /// Odd, and possibly benign (the text says why).
    Notice,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The check's id (`reg-handle-null`, ...: [`CheckId::as_str`]).
    pub check: &'static str,
    pub severity: Severity,
    /// What it concerns: a global's name, "provider {GUID} (name)", "session N (name)".
    pub subject: String,
    pub address: Option<VirtAddr>,
    pub field: Option<String>,
    pub logger_id: Option<u64>,
    /// What the dump holds.
    pub evidence: String,
    /// What a clean kernel would hold.
    pub expected: String,
}

/// A check and whether it could run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckRun {
    pub check: &'static str,
    /// Objects examined (globals, providers, sessions).
    pub examined: u64,
    pub findings: u64,
    /// Why it could not run, or ran only in part (None: ran in full).
    pub limit: Option<String>,
}

/// Every check's findings and runs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TamperReport {
    pub findings: Vec<Finding>,
    pub runs: Vec<CheckRun>,
}

impl TamperReport {
    /// Record that `check` ran over `examined` objects; its findings are those pushed since
    /// `before`.
    pub(crate) fn push_run(
        &mut self,
        check: CheckId,
        examined: u64,
        before: usize,
        limit: Option<String>,
    ) {
        let findings = (self.findings.len() - before) as u64;
        self.runs.push(CheckRun {
            check: check.as_str(),
            examined,
            findings,
            limit,
        });
    }
}
