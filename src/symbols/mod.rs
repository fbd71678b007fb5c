//! The symbols layer: kernel structure layouts and global-symbol addresses, from a PDB, a
//! local symbol store, a Volatility 3 ISF file, or the built-in per-version tables.

pub mod builtin;
mod codeview;
mod identity;
pub mod isf;
pub mod layout;
mod msf;
pub mod pdb;
#[doc(hidden)]
pub mod pdb_reference;
#[cfg(feature = "fetch")]
pub mod server;
pub mod store;

pub use builtin::corpus::CorpusMatch;
pub use builtin::TableFamily;
pub use identity::PdbIdentity;
pub use layout::{Field, LayoutSource, StructLayout, TypeRef, TypeStore};

mod symbol_map;

use serde::Serialize;
use std::path::PathBuf;
pub use symbol_map::SymbolMap;
use thiserror::Error;

/// The structures the tool reads; a PDB or ISF is asked for these (and what they embed).
pub const WANTED_TYPES: &[&str] = &[
    "_WMI_LOGGER_CONTEXT",
    "_WMI_BUFFER_HEADER",
    "_ETW_SILODRIVERSTATE",
    "_ESERVERSILO_GLOBALS",
    "_ETW_SILO_TRACING_BLOCK",
    "_ETW_BUFFER_QUEUE",
    "_ETW_REALTIME_CONSUMER",
    "_KPRCB",
    "_KUSER_SHARED_DATA",
    "_KLDR_DATA_TABLE_ENTRY",
    "_LDR_DATA_TABLE_ENTRY",
    "_DBGKD_GET_VERSION64",
    "_KDDEBUGGER_DATA64",
    "_EPROCESS",
    "_KPROCESS",
    "_ETHREAD",
    "_KTHREAD",
    "_EX_FAST_REF",
    "_LIST_ENTRY",
    "_UNICODE_STRING",
    "_KSYSTEM_TIME",
    "_PERFINFO_CCSWAP_BUFFER",
    "_ETW_GUID_ENTRY",
    "_ETW_REG_ENTRY",
    "_ETW_HASH_BUCKET",
    "_TRACE_ENABLE_INFO",
];

/// The enumerations the tool reads constants from (names of states and wait reasons, and the
/// CCSWAP bias `_KWAIT_REASON.MaximumWaitReason`).
pub const WANTED_ENUMS: &[&str] = &["_KWAIT_REASON", "_KTHREAD_STATE", "_ETW_BUFFER_STATE"];

/// The kernel globals the tool uses.
pub const WANTED_SYMBOLS: &[&str] = &[
    "EtwpHostSiloState",
    "PspHostSiloGlobals",
    "WmipLoggerContext",
    "EtwpDebuggerData",
    "KiProcessorBlock",
    "KeNumberProcessors",
    "PsActiveProcessHead",
    "PsLoadedModuleList",
    "KdDebuggerDataBlock",
    "KdVersionBlock",
    "MmPfnDatabase",
    "NtBuildLabEx",
    "KiCurrentEtwBufferBase",
    "KiCurrentEtwBufferOffset",
    "EtwpActiveSystemLoggers",
    "EtwpGroupMasks",
    "EtwpSystemLogger",
    "EtwpGuidHashTable",
    "EtwpGetPerfCounter",
    "EtwpGetHostPerfCounter",
    "EtwpGetSystemTime",
    "EtwpGetCycleCount",
    "KeQueryPerformanceCounter",
];

/// The kernel routines a pre-19041 `_WMI_LOGGER_CONTEXT.GetCpuClock` may hold (one per clock
/// type; read by the clock-hook check).
pub const CLOCK_ROUTINES: &[&str] = &[
    "EtwpGetPerfCounter",
    "EtwpGetHostPerfCounter",
    "EtwpGetSystemTime",
    "EtwpGetCycleCount",
    "KeQueryPerformanceCounter",
];

/// The kernel's global provider registration handles whose names do not follow the
/// `Etw*RegHandle` pattern: `EtwpRegTraceHandle`, the registration of
/// Microsoft-Windows-Kernel-Registry (`EtwRegister(&RegistryProvGuid, EtwpRegTraceEnableCallback,
/// NULL, &EtwpRegTraceHandle)` in EtwpInitialize; tools/provider_names/generate.py cites the
/// sources).
pub(crate) const OTHER_REG_HANDLES: &[&str] = &["EtwpRegTraceHandle"];

/// A kernel global provider registration handle (`Etw*ProvRegHandle`, `Etw*RegHandle`, and
/// `OTHER_REG_HANDLES`): the tool uses every one the symbols name (the tamper checks).
pub fn is_reg_handle(name: &str) -> bool {
    is_reg_handle_bytes(name.as_bytes())
}

/// [`is_reg_handle`] on a name's bytes.
fn is_reg_handle_bytes(name: &[u8]) -> bool {
    (name.starts_with(b"Etw") && name.ends_with(b"RegHandle"))
        || OTHER_REG_HANDLES.iter().any(|h| h.as_bytes() == name)
}

/// A global the tool reads: one of [`WANTED_SYMBOLS`] or a registration handle
/// ([`is_reg_handle`]). What [`Globals::Tool`] keeps.
pub fn is_tool_global(name: &str) -> bool {
    is_tool_global_bytes(name.as_bytes())
}

/// [`is_tool_global`] on a name's bytes (a PDB's names, before they are decoded).
pub(crate) fn is_tool_global_bytes(name: &[u8]) -> bool {
    is_reg_handle_bytes(name) || WANTED_SYMBOLS.iter().any(|w| w.as_bytes() == name)
}

/// The first two bytes of every global [`is_tool_global`] accepts, as a set of 65,536 bits
/// (built from [`WANTED_SYMBOLS`], [`OTHER_REG_HANDLES`] and the `Etw` of the `Etw*RegHandle`
/// names): a PDB load keeping [`Globals::Tool`] skips the ~26,000 other names of a kernel
/// before finding where they end.
static TOOL_FIRST_TWO: [u64; 1024] = {
    const fn add(mut set: [u64; 1024], name: &str) -> [u64; 1024] {
        let b = name.as_bytes();
        assert!(b.len() >= 2, "a tool global of fewer than two bytes");
        let pair = (b[0] as usize) << 8 | b[1] as usize;
        set[pair / 64] |= 1 << (pair % 64);
        set
    }
    let mut set = add([0; 1024], "Etw");
    let mut i = 0;
    while i < WANTED_SYMBOLS.len() {
        set = add(set, WANTED_SYMBOLS[i]);
        i += 1;
    }
    let mut i = 0;
    while i < OTHER_REG_HANDLES.len() {
        set = add(set, OTHER_REG_HANDLES[i]);
        i += 1;
    }
    set
};

/// Whether a name whose first bytes are `start` may be one [`is_tool_global`] accepts (false
/// for every other name whose first two bytes are not those of a tool global; `start` shorter
/// than two bytes: not one).
pub(crate) fn may_be_tool_global(start: &[u8]) -> bool {
    match start {
        [a, b, ..] => {
            let pair = usize::from(*a) << 8 | usize::from(*b);
            TOOL_FIRST_TWO[pair / 64] & (1 << (pair % 64)) != 0
        }
        _ => false,
    }
}

/// Which global symbols a symbol-file load keeps.
///
/// A kernel PDB names about 26,000 globals; the tool reads a few dozen of them. Keeping only
/// those spares building a table of every name (issue 30 item 4: a fifth of `etwdump symbols
/// --pdb`'s time). The map kept is the full one restricted to those names: each name still
/// takes the address of its first record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Globals {
    /// Every global (for `--all-symbols`, and where any name may be asked for).
    All,
    /// Only those [`is_tool_global`] accepts.
    Tool,
}

impl Globals {
    /// Whether a load with this selection keeps the global `name`.
    pub fn keeps(self, name: &str) -> bool {
        match self {
            Globals::All => true,
            Globals::Tool => is_tool_global(name),
        }
    }
}

#[derive(Debug, Error)]
pub enum SymbolError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a readable PDB: {detail}")]
    BadPdb { path: PathBuf, detail: String },
    #[error("{path}: not a readable ISF file: {detail}")]
    BadIsf { path: PathBuf, detail: String },
    #[error(
        "no symbols for {wanted} in the symbol store (searched {searched} paths, first {first})"
    )]
    NotInStore {
        wanted: String,
        searched: usize,
        first: String,
    },
    #[error("the kernel's PDB cannot be looked up in a symbol store: {0}")]
    NoIdentity(String),
    #[error("{wanted}: in no local store ({searched} paths searched), and no symbol server gave it: {why}")]
    NotFetched {
        wanted: String,
        searched: usize,
        why: String,
    },
    #[error("symbol mismatch: the dump's kernel is {dump}, but the {source_kind} is {symbols} (use --force to use them anyway)")]
    Mismatch {
        dump: String,
        symbols: String,
        source_kind: &'static str,
    },
    #[error("the symbols have no layout for {0} and no built-in layout covers this build")]
    MissingType(String),
}

/// Where the symbols came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymbolSource {
    Pdb(PathBuf),
    Isf(PathBuf),
    /// No symbol file: built-in layouts and symbol-less routes only.
    None,
}

impl SymbolSource {
    pub fn kind(&self) -> &'static str {
        match self {
            SymbolSource::Pdb(_) => "pdb",
            SymbolSource::Isf(_) => "isf",
            SymbolSource::None => "none",
        }
    }
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            SymbolSource::Pdb(p) | SymbolSource::Isf(p) => Some(p),
            SymbolSource::None => None,
        }
    }
}

/// The built-in corpus entry whose layouts are in use (see [`builtin::corpus`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CorpusUse {
    /// `exact`: the kernel's PDB GUID and age equal the entry's; `nearest`: the newest corpus
    /// build of the nearest earlier major (layouts only).
    #[serde(rename = "match")]
    pub kind: CorpusMatch,
    /// The entry's version, e.g. "10.0.19041.804", and its major build (19041).
    pub version: String,
    pub major: u32,
    /// The entry's PDB GUID (32 hex digits) and age; None for a public-layout entry.
    pub guid: Option<String>,
    pub age: Option<u32>,
    /// None for an `ntkrnlmp.pdb` corpus entry; else the public source of its layouts
    /// (`vergilius`, `ntoskrnlib`).
    pub source: Option<String>,
    /// Structures the public-layout entry lacks, taken from the newest earlier entry that has
    /// them: "_KPRCB (10.0.22000.2538)".
    pub borrowed: Vec<String>,
    /// Other layouts the table has of this build (their variant labels): used only where
    /// memory chooses one (`etw::silo`, reported by `info`'s Layout check).
    pub variants: Vec<String>,
    /// Whether the entry's global RVAs are in use (exact match without a symbol file).
    pub rvas: bool,
    /// One line for people: "built-in exact match: 10.0.19041.804" or "built-in nearest
    /// earlier layout: 10.0.19041.3570 (not an exact match)".
    pub description: String,
}

/// Layouts and symbol addresses for one kernel.
#[derive(Debug)]
pub struct Symbols {
    pub source: SymbolSource,
    /// The PDB identity the symbols describe (None for built-in only).
    pub identity: Option<PdbIdentity>,
    pub pointer_size: u64,
    pub machine: Option<u16>,
    types: TypeStore,
    rvas: SymbolMap,
    builtin: TypeStore,
    /// Global RVAs from the built-in corpus (exact match, no symbol file only).
    builtin_rvas: SymbolMap,
    /// The hand-written built-in era in use, if any, and the caveats of the built-in layouts.
    pub builtin_era: Option<&'static str>,
    pub builtin_notes: Vec<String>,
    /// The built-in corpus entry in use, if any.
    pub builtin_corpus: Option<CorpusUse>,
}

impl Symbols {
    /// No symbol file.
    pub fn none(pointer_size: u64) -> Symbols {
        Symbols {
            source: SymbolSource::None,
            identity: None,
            pointer_size,
            machine: None,
            types: TypeStore::default(),
            rvas: SymbolMap::default(),
            builtin: TypeStore::default(),
            builtin_rvas: SymbolMap::default(),
            builtin_era: None,
            builtin_notes: Vec::new(),
            builtin_corpus: None,
        }
    }

    /// Load a PDB (the types in `wanted` and everything they embed; all global symbols).
    pub fn from_pdb(path: &std::path::Path, wanted: &[&str]) -> Result<Symbols, SymbolError> {
        Symbols::from_pdb_keeping(path, wanted, Globals::All)
    }

    /// [`from_pdb`](Self::from_pdb) keeping only the global symbols `globals` selects (the
    /// layouts, identity and errors are the same).
    pub fn from_pdb_keeping(
        path: &std::path::Path,
        wanted: &[&str],
        globals: Globals,
    ) -> Result<Symbols, SymbolError> {
        let c = pdb::load(path, wanted, globals)?;
        Ok(Symbols {
            source: SymbolSource::Pdb(path.to_path_buf()),
            identity: Some(c.identity),
            pointer_size: c.pointer_size,
            machine: c.machine,
            types: c.types,
            rvas: c.symbols,
            ..Symbols::none(c.pointer_size)
        })
    }

    /// Load an ISF file (`.json` or `.json.xz`).
    pub fn from_isf(path: &std::path::Path, wanted: &[&str]) -> Result<Symbols, SymbolError> {
        let c = isf::load(path, wanted)?;
        Ok(Symbols {
            source: SymbolSource::Isf(path.to_path_buf()),
            identity: c.identity,
            pointer_size: c.pointer_size,
            machine: c.machine,
            types: c.types,
            rvas: c.symbols,
            ..Symbols::none(c.pointer_size)
        })
    }

    /// Add the built-in layouts of `build` as the fallback for types the symbols lack, as for
    /// a kernel whose PDB identity is unknown (see [`with_builtin_for`](Self::with_builtin_for)).
    pub fn with_builtin(self, build: u32, family: TableFamily) -> Symbols {
        self.with_builtin_for(build, family, None)
    }

    /// Add the built-in layouts for a kernel of NT build `build` whose PDB identity (from
    /// the dump's CodeView record) is `kernel`, as the fallback for types the symbols lack.
    ///
    /// Without a symbol file, x64 only: a kernel whose GUID and age equal a corpus entry's
    /// gets that build's layouts, global RVAs and enums (`builtin-exact`); any other x64
    /// kernel of a build at or after a corpus major gets the layouts of the newest corpus
    /// build of the nearest earlier major (`builtin-nearest`, no RVAs, no enums), unless a
    /// hand-written era table starts after that major (9200, 10240, 10586, 15063–17134: the
    /// era table is that version's own). The hand-written era tables fill whatever the corpus
    /// does not give (x86, builds before 7601, `_KDDEBUGGER_DATA64`). With a symbol file the
    /// hand-written tables alone fill the types it lacks, as before the corpus existed.
    pub fn with_builtin_for(
        mut self,
        build: u32,
        family: TableFamily,
        kernel: Option<&PdbIdentity>,
    ) -> Symbols {
        let hand = builtin::layouts(build, family);
        if let Some(b) = hand {
            self.builtin_era = Some(b.era);
            self.builtin_notes = b.notes;
            for t in b.types {
                self.builtin.insert(t);
            }
        }
        if family != TableFamily::X64 || self.source != SymbolSource::None {
            return self;
        }
        let exact = kernel.and_then(builtin::corpus::exact);
        let (entry, kind) = match exact {
            Some(e) => (e, CorpusMatch::Exact),
            None => match builtin::corpus::nearest_earlier(build) {
                Some(n) if builtin::era_start(build).is_none_or(|s| s <= n.major) => {
                    (n, CorpusMatch::Nearest)
                }
                _ => {
                    if let Some(e) = builtin::corpus::load_error() {
                        self.builtin_notes.push(e.to_string());
                    }
                    return self;
                }
            },
        };
        let source = match kind {
            CorpusMatch::Exact => LayoutSource::BuiltinExact,
            CorpusMatch::Nearest => LayoutSource::BuiltinNearest,
        };
        for l in entry.layouts() {
            let mut l = l.clone();
            l.source = source;
            self.builtin.insert(l);
        }
        // A public-layout entry's missing structures: from the newest earlier entry having them.
        let borrowed_from = builtin::corpus::borrowed(entry);
        for (l, _) in &borrowed_from {
            let mut l = (*l).clone();
            l.source = LayoutSource::BuiltinNearest;
            self.builtin.insert(l);
        }
        let borrowed: Vec<String> = borrowed_from
            .iter()
            .filter(|(l, _)| WANTED_TYPES.contains(&l.name.raw()))
            .map(|(l, b)| format!("{} ({})", l.name, b.version))
            .collect();
        let total = builtin::corpus::entries().len();
        let mut notes = Vec::new();
        let description = match kind {
            CorpusMatch::Exact => self.use_exact(entry, build, total, &mut notes),
            CorpusMatch::Nearest => {
                nearest_notes(entry, build, kernel, total, &borrowed, &mut notes)
            }
        };
        // The hand-written caveats describe layouts the corpus has replaced; only the KDBG
        // layout is still theirs.
        notes.push(builtin::KDBG_NOTE.to_string());
        self.builtin_notes = notes;
        self.builtin_corpus = Some(CorpusUse {
            kind,
            version: entry.version.clone(),
            major: entry.major,
            guid: entry.guid.clone(),
            age: entry.age,
            source: entry.source.clone(),
            borrowed,
            variants: builtin::corpus::variants(entry)
                .iter()
                .filter_map(|b| b.variant.clone())
                .collect(),
            rvas: kind == CorpusMatch::Exact,
            description,
        });
        self
    }

    /// Use corpus entry `entry`, an exact match of the kernel (the dump says build `build`; the
    /// table has `total` builds): its enums and global RVAs too. Adds what it says to `notes`;
    /// returns the description.
    fn use_exact(
        &mut self,
        entry: &builtin::corpus::CorpusBuild,
        build: u32,
        total: usize,
        notes: &mut Vec<String>,
    ) -> String {
        for (name, constants) in entry.enums() {
            self.builtin.insert_enum(name, constants.to_vec());
        }
        self.builtin_rvas = entry.symbols().iter().map(|(k, v)| (k, *v)).collect();
        notes.push(format!(
            "built-in exact match: the kernel's PDB GUID and age are those of \
             {} in the built-in table of {total} ntkrnlmp.pdb builds; its layouts, \
             global RVAs and enums are used",
            entry.version
        ));
        if build != entry.major {
            notes.push(format!(
                "the dump says build {build}; its kernel binary is {} (one kernel \
                 can serve several build numbers, e.g. 19041-19045)",
                entry.version
            ));
        }
        format!("built-in exact match: {}", entry.version)
    }

    /// Drop the built-in corpus RVAs when a global the dump itself reveals (`known`: name and
    /// RVA, from the header and the KDBG) is at a different RVA: the dump's kernel is then not
    /// the build its CodeView record names. Returns the warning to show, if any.
    pub fn check_builtin_rvas(&mut self, known: &[(&str, u64)]) -> Option<String> {
        let bad: Vec<String> = known
            .iter()
            .filter_map(|&(name, rva)| {
                let b = *self.builtin_rvas.get(name)?;
                (b != rva).then(|| format!("{name} at RVA {rva:#x} (table: {b:#x})"))
            })
            .collect();
        if bad.is_empty() {
            return None;
        }
        self.builtin_rvas.clear();
        if let Some(c) = &mut self.builtin_corpus {
            c.rvas = false;
        }
        Some(format!(
            "the built-in table's global RVAs for this kernel's GUID are not used: the dump has {}",
            bad.join(", ")
        ))
    }

    /// The layout of a structure: from the symbol file if it has it, else built-in.
    pub fn layout(&self, name: &str) -> Option<&StructLayout> {
        self.types.get(name).or_else(|| self.builtin.get(name))
    }

    /// Like [`layout`](Self::layout), but an error naming the type when absent.
    pub fn require(&self, name: &str) -> Result<&StructLayout, SymbolError> {
        self.layout(name)
            .ok_or_else(|| SymbolError::MissingType(name.to_string()))
    }

    /// RVA of a global symbol (x86 names without the leading underscore): from the symbol
    /// file, else (no symbol file, exact corpus match) from the built-in table.
    pub fn rva(&self, name: &str) -> Option<u64> {
        self.rvas
            .get(name)
            .or_else(|| self.builtin_rvas.get(name))
            .copied()
    }

    /// Every global symbol the symbol file gives, with its RVA (not the built-in table's few
    /// data globals: they would name code addresses after the nearest global).
    pub fn all_symbols(&self) -> impl Iterator<Item = (&str, u64)> {
        self.rvas.iter().map(|(k, v)| (k, *v))
    }

    /// Number of global symbols the symbol file gives.
    pub fn symbol_count(&self) -> usize {
        self.rvas.len()
    }

    /// The global RVAs of the built-in table in use (exact corpus match only).
    pub(crate) fn builtin_symbols(&self) -> impl Iterator<Item = (&str, u64)> {
        self.builtin_rvas.iter().map(|(k, v)| (k, *v))
    }

    /// Constant `constant` of enumeration `name` (one of [`WANTED_ENUMS`]), from the symbol
    /// file, else from the built-in table for exactly this kernel; None when neither has the
    /// enumeration or the constant.
    pub fn enum_value(&self, name: &str, constant: &str) -> Option<i64> {
        if self.types.has_enum(name) {
            return self.types.enum_value(name, constant);
        }
        self.builtin.enum_value(name, constant)
    }

    /// The name for `value` of enumeration `name` (symbol file first, as
    /// [`enum_value`](Self::enum_value)).
    pub fn enum_name(&self, name: &str, value: i64) -> Option<&str> {
        if self.types.has_enum(name) {
            return self.types.enum_name(name, value);
        }
        self.builtin.enum_name(name, value)
    }

    /// The structures the symbol file itself provides.
    pub fn own_types(&self) -> &TypeStore {
        &self.types
    }
}

/// What to say of corpus entry `entry` used as the nearest earlier layout for a kernel of
/// build `build` (identity `kernel`; the table has `total` builds; `borrowed`: the structures
/// taken from earlier entries): notes added to `notes`; returns the description.
fn nearest_notes(
    entry: &builtin::corpus::CorpusBuild,
    build: u32,
    kernel: Option<&PdbIdentity>,
    total: usize,
    borrowed: &[String],
    notes: &mut Vec<String>,
) -> String {
    let variants: Vec<String> = ["_WMI_LOGGER_CONTEXT", "_ETW_SILODRIVERSTATE", "_KPRCB"]
        .iter()
        .map(|t| (t, builtin::corpus::variants_in_major(entry.major, t)))
        .filter(|(_, n)| *n > 1)
        .map(|(t, n)| format!("{n} of {t}"))
        .collect();
    notes.push(format!(
        "built-in nearest earlier layout: the kernel (build {build}{}) is not among \
         the {total} builds of the built-in table; the layouts of {}{}, the newest \
         build of {} there, are used{}; global RVAs are not (they differ between \
         builds): give the kernel's PDB or ISF for exact layouts and globals",
        kernel.map(|k| format!(", {k}")).unwrap_or_default(),
        entry.version,
        entry
            .source
            .as_ref()
            .map(|s| format!(" (public layouts from {s}, see tools/public_layouts/SOURCES.md)"))
            .unwrap_or_default(),
        entry.major,
        if variants.is_empty() {
            String::new()
        } else {
            format!(
                " (the table has several layouts within {}: {})",
                entry.major,
                variants.join(", ")
            )
        }
    ));
    let others = builtin::corpus::variants(entry);
    if !others.is_empty() {
        notes.push(format!(
            "the table has another layout of {} too, chosen only by evidence in memory: {} (see \
             tools/public_layouts/SOURCES.md); `info` (Layout check, \
             _ETW_SILODRIVERSTATE) says which one the dump has",
            entry.version,
            others
                .iter()
                .map(|b| format!(
                    "{} ({})",
                    b.variant.as_deref().unwrap_or("?"),
                    b.release.as_deref().unwrap_or("?")
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !borrowed.is_empty() {
        notes.push(format!(
            "the public layouts of {} lack {}: taken from the newest earlier build \
             of the table that has them",
            entry.version,
            borrowed.join(", ")
        ));
    }
    format!(
        "built-in nearest earlier layout: {} ({}not an exact match)",
        entry.version,
        match (&entry.source, &entry.release) {
            (Some(s), Some(r)) => format!("{r}, public layouts from {s}; "),
            (Some(s), None) => format!("public layouts from {s}; "),
            _ => String::new(),
        }
    )
}

#[cfg(test)]
mod tool_global_tests {
    use super::*;

    /// The two-byte test lets every tool global through (and the names that only look like
    /// one, which the full test then refuses), and keeps out names of other first bytes.
    #[test]
    fn first_two_bytes_let_every_tool_global_through() {
        for n in WANTED_SYMBOLS.iter().chain(OTHER_REG_HANDLES) {
            assert!(is_tool_global(n) && may_be_tool_global(n.as_bytes()), "{n}");
        }
        for n in [
            "EtwpFooProvRegHandle",
            "EtwKernelRegHandle",
            "Etw\u{FFFD}RegHandle",
        ] {
            assert!(is_tool_global(n) && may_be_tool_global(n.as_bytes()), "{n}");
        }
        for n in [
            "ExAllocatePool",
            "_KiFoo",
            "a",
            "",
            "IoCreateFile",
            "\u{e9}tw",
        ] {
            assert!(!may_be_tool_global(n.as_bytes()), "{n}");
            assert!(!is_tool_global(n), "{n}");
        }
    }
}
