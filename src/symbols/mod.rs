//! The symbols layer: kernel structure layouts and global-symbol addresses, from a PDB, a
//! local symbol store, a Volatility 3 ISF file, or the built-in per-version tables.

pub mod builtin;
mod identity;
pub mod isf;
pub mod layout;
pub mod pdb;
pub mod store;

pub use identity::PdbIdentity;
pub use layout::{Field, LayoutSource, StructLayout, TypeRef, TypeStore};

use std::collections::HashMap;
use std::path::PathBuf;
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
];

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

/// Layouts and symbol addresses for one kernel.
#[derive(Debug)]
pub struct Symbols {
    pub source: SymbolSource,
    /// The PDB identity the symbols describe (None for built-in only).
    pub identity: Option<PdbIdentity>,
    pub pointer_size: u64,
    pub machine: Option<u16>,
    types: TypeStore,
    rvas: HashMap<String, u64>,
    builtin: TypeStore,
    /// The built-in era in use, if any, and its caveats.
    pub builtin_era: Option<&'static str>,
    pub builtin_notes: Vec<String>,
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
            rvas: HashMap::new(),
            builtin: TypeStore::default(),
            builtin_era: None,
            builtin_notes: Vec::new(),
        }
    }

    /// Load a PDB (the types in `wanted` and everything they embed; all global symbols).
    pub fn from_pdb(path: &std::path::Path, wanted: &[&str]) -> Result<Symbols, SymbolError> {
        let c = pdb::load(path, wanted)?;
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

    /// Add the built-in layouts of `build` as the fallback for types the symbols lack.
    pub fn with_builtin(mut self, build: u32, x64: bool) -> Symbols {
        if let Some(b) = builtin::layouts(build, x64) {
            self.builtin_era = Some(b.era);
            self.builtin_notes = b.notes;
            for t in b.types {
                self.builtin.insert(t);
            }
        }
        self
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

    /// RVA of a global symbol (x86 names without the leading underscore).
    pub fn rva(&self, name: &str) -> Option<u64> {
        self.rvas.get(name).copied()
    }

    /// Every global symbol known, with its RVA.
    pub fn all_symbols(&self) -> impl Iterator<Item = (&str, u64)> {
        self.rvas.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Number of global symbols known.
    pub fn symbol_count(&self) -> usize {
        self.rvas.len()
    }

    /// Constant `constant` of enumeration `name` (one of [`WANTED_ENUMS`]), from the symbol
    /// file; None when it lacks the enumeration or the constant.
    pub fn enum_value(&self, name: &str, constant: &str) -> Option<i64> {
        self.types.enum_value(name, constant)
    }

    /// The symbol file's name for `value` of enumeration `name`.
    pub fn enum_name(&self, name: &str, value: i64) -> Option<&str> {
        self.types.enum_name(name, value)
    }

    /// The structures the symbol file itself provides.
    pub fn own_types(&self) -> &TypeStore {
        &self.types
    }
}
