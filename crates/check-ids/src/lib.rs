//! The ids of etwdump's tamper checks (`etwdump check`; README "Tamper checks"): one home
//! for the strings the library reports (JSON `check`, the table's first column), its tests
//! compare and the forge (`etwdump-forge`, which must not depend on the reader) expects.
//! No dependencies.

use std::fmt;
use std::str::FromStr;

/// A tamper check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckId {
    /// `reg-handle-null`: an `Etw*ProvRegHandle` / `Etw*RegHandle` global the build has is NULL.
    RegHandleNull,
    /// `reg-handle-invalid`: such a global points elsewhere than at its provider's
    /// registration on a GUID entry of the GUID table.
    RegHandleInvalid,
    /// `provider-enable-state`: a provider enabled by a live session has its aggregate
    /// `ProviderEnableInfo.IsEnabled` cleared.
    ProviderEnableState,
    /// `enable-unknown-logger`: an enabled `EnableInfo` slot names a logger id with no session.
    EnableUnknownLogger,
    /// `clock-hook`: a logger's `GetCpuClock` is not one of the kernel's clock routines (or,
    /// from 19041, not an index 0-3).
    ClockHook,
    /// `consumer-mode`: real-time consumers on a session not in real-time mode.
    ConsumerMode,
    /// `etw-write-patch`: a process's ntdll `EtwEventWrite`-family entry is patched.
    EtwWritePatch,
}

impl CheckId {
    /// Every check, in the order the library runs them.
    pub const ALL: [CheckId; 7] = [
        CheckId::RegHandleNull,
        CheckId::RegHandleInvalid,
        CheckId::ProviderEnableState,
        CheckId::EnableUnknownLogger,
        CheckId::ClockHook,
        CheckId::ConsumerMode,
        CheckId::EtwWritePatch,
    ];

    /// The id as reported (`clock-hook`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            CheckId::RegHandleNull => "reg-handle-null",
            CheckId::RegHandleInvalid => "reg-handle-invalid",
            CheckId::ProviderEnableState => "provider-enable-state",
            CheckId::EnableUnknownLogger => "enable-unknown-logger",
            CheckId::ClockHook => "clock-hook",
            CheckId::ConsumerMode => "consumer-mode",
            CheckId::EtwWritePatch => "etw-write-patch",
        }
    }
}

impl fmt::Display for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is no check's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownCheck(pub String);

impl fmt::Display for UnknownCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no tamper check is called {:?}", self.0)
    }
}

impl std::error::Error for UnknownCheck {}

impl FromStr for CheckId {
    type Err = UnknownCheck;

    fn from_str(s: &str) -> Result<CheckId, UnknownCheck> {
        CheckId::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCheck(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_parses_back_and_is_unique() {
        for c in CheckId::ALL {
            assert_eq!(c.as_str().parse(), Ok(c));
            assert_eq!(c.to_string(), c.as_str());
        }
        let mut ids: Vec<&str> = CheckId::ALL.iter().map(|c| c.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), CheckId::ALL.len());
        assert!("clock_hook".parse::<CheckId>().is_err());
    }
}
