//! Built-in per-version layouts of the structures the tool reads, for when the symbols lack
//! them (public-only PDBs) or no symbols are given. Chosen by NT build number.
//!
//! Sources: the reference texts (Geoff Chappell's WMI_LOGGER_CONTEXT, WMI_BUFFER_HEADER,
//! ETW_SILODRIVERSTATE and KPRCB pages, etw-internals.md, crash-dump-format.md §2.3).
//! A test compares them field by field with the real ISF files.

use super::layout::StructLayout;

/// The layouts for one Windows version and architecture.
#[derive(Clone, Debug)]
pub struct BuiltinLayouts {
    /// The version era the tables describe, e.g. "6.1", "1607", "2004".
    pub era: &'static str,
    /// Layouts (source = Builtin): _WMI_LOGGER_CONTEXT, _WMI_BUFFER_HEADER,
    /// _KDDEBUGGER_DATA64, and where the version has them _ETW_SILODRIVERSTATE,
    /// _ESERVERSILO_GLOBALS, _KPRCB (only the fields the reference documents).
    pub types: Vec<StructLayout>,
    /// Caveats the user should see (e.g. "layouts vary between builds of 17763").
    pub notes: Vec<String>,
}

/// Built-in layouts for NT build `build` on x64 (`x64 = true`) or x86.
/// `None` when the build is outside every table.
pub fn layouts(build: u32, x64: bool) -> Option<BuiltinLayouts> {
    let _ = (build, x64);
    None
}
