//! The options several commands share (ripgrep's `flags` module in small): the dump, the
//! symbols, and the `--format` values, each chosen once as a [`Renderer`].

use etwdump::kernel::context::SymbolOptions;
use etwdump::render::output::Renderer;
use etwdump::report::filter::{self, EventFilter};
use etwdump::report::RowFormat;
use std::path::PathBuf;

// The dump and its symbols: what every command that reads the kernel takes (plain comments:
// a flattened struct's doc comment is no help text).
#[derive(clap::Args)]
pub struct KernelArgs {
    #[command(flatten)]
    pub dump: DumpArgs,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

// `--session` of `buffers`, `events` and `extract`.
#[derive(clap::Args)]
pub struct SessionArg {
    /// Only this session (logger id or name)
    #[arg(long)]
    pub session: Option<String>,
}

#[derive(clap::Args)]
pub struct DumpArgs {
    /// The crash dump (MEMORY.DMP, a kernel minidump, ...)
    pub dump: PathBuf,
    /// Refuse a dump whose page data is cut short (by default it is read, as WinDbg does,
    /// with one warning, and pages past the end of the file are "not in the dump")
    #[arg(long)]
    pub strict: bool,
    /// Accepted for compatibility: truncated dumps are read by default now
    #[arg(long, hide = true)]
    pub allow_truncated: bool,
    /// Read the file as placed by this physical-memory layout (JSON, written by a host
    /// framework such as the Volatility 3 plugins: physical ranges, and optionally the
    /// architecture and page-table root it found; docs/reference.md "Layouts from a host framework")
    #[arg(long, value_name = "FILE")]
    pub layout: Option<PathBuf>,
}

#[derive(clap::Args, Default)]
pub struct SymbolArgs {
    /// The kernel's PDB (ntkrnlmp.pdb, ntkrpamp.pdb, ntoskrnl.pdb)
    #[arg(long, value_name = "FILE", conflicts_with = "isf")]
    pub pdb: Option<PathBuf>,
    /// A Volatility 3 ISF file (.json or .json.xz)
    #[arg(long, value_name = "FILE")]
    pub isf: Option<PathBuf>,
    /// A local symbol store (DIR/ntkrnlmp.pdb/<GUID><AGE>/ntkrnlmp.pdb, or Volatility's
    /// DIR/windows/ntkrnlmp.pdb/<GUID>-<AGE>.json.xz); repeatable. The local directories of
    /// _NT_SYMBOL_PATH are searched too
    #[arg(long = "symbols", value_name = "DIR")]
    pub stores: Vec<PathBuf>,
    /// Use the symbols even when they do not match the dump's kernel
    #[arg(long)]
    pub force: bool,
    /// Fetch the kernel's PDB from this symbol server (e.g.
    /// https://msdl.microsoft.com/download/symbols) when no local store has it; repeatable.
    /// Never without this option or --fetch-symbols
    #[arg(long = "symbol-server", value_name = "URL")]
    pub servers: Vec<String>,
    /// Where fetched PDBs are kept (the Microsoft layout; default: the first --symbols DIR,
    /// else $XDG_CACHE_HOME/etwdump/symbols or ~/.cache/etwdump/symbols)
    #[arg(long = "symbol-cache", value_name = "DIR")]
    pub symbol_cache: Option<PathBuf>,
    /// Also fetch through the srv*CACHE*URL entries of _NT_SYMBOL_PATH (by default only their
    /// local caches are searched)
    #[arg(long)]
    pub fetch_symbols: bool,
}

impl SymbolArgs {
    pub fn options(&self) -> SymbolOptions {
        SymbolOptions {
            pdb: self.pdb.clone(),
            isf: self.isf.clone(),
            stores: self.stores.clone(),
            nt_symbol_path: std::env::var("_NT_SYMBOL_PATH").ok(),
            force: self.force,
            servers: self
                .servers
                .iter()
                .map(|u| (u.clone(), self.cache()))
                .collect(),
            fetch_nt_symbol_path: self.fetch_symbols,
            default_cache: Some(self.cache()),
        }
    }

    /// The cache for fetched PDBs.
    fn cache(&self) -> PathBuf {
        if let Some(c) = self
            .symbol_cache
            .clone()
            .or_else(|| self.stores.first().cloned())
        {
            return c;
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("etwdump").join("symbols")
    }
}

/// `--format` of `info`, `etl` and `symbols`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    Table,
    Json,
}

impl From<FormatArg> for Renderer {
    fn from(f: FormatArg) -> Renderer {
        Renderer::new(match f {
            FormatArg::Table => RowFormat::Table,
            FormatArg::Json => RowFormat::Json,
        })
    }
}

/// A row format as a model format: table and JSON are both; CSV and JSON Lines (given by
/// name in the error) are for listings only.
impl TryFrom<RowFormatArg> for FormatArg {
    type Error = &'static str;

    fn try_from(f: RowFormatArg) -> Result<FormatArg, &'static str> {
        match f {
            RowFormatArg::Table => Ok(FormatArg::Table),
            RowFormatArg::Json => Ok(FormatArg::Json),
            RowFormatArg::Jsonl => Err("jsonl"),
            RowFormatArg::Csv => Err("csv"),
        }
    }
}

/// `--format` of `sessions` and `buffers`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ListFormatArg {
    Table,
    /// {format_version, command, records, warnings} (docs/output-contract.md)
    Json,
    Csv,
}

impl From<ListFormatArg> for Renderer {
    fn from(f: ListFormatArg) -> Renderer {
        Renderer::new(match f {
            ListFormatArg::Table => RowFormat::Table,
            ListFormatArg::Json => RowFormat::Json,
            ListFormatArg::Csv => RowFormat::Csv,
        })
    }
}

/// `--format` of `cswitch` and `events`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum RowFormatArg {
    Table,
    /// {format_version, command, records, warnings} (docs/output-contract.md)
    Json,
    /// One JSON object per row with the Timesketch fields; warnings as JSON lines on stderr
    Jsonl,
    Csv,
}

impl From<RowFormatArg> for Renderer {
    fn from(f: RowFormatArg) -> Renderer {
        Renderer::new(match f {
            RowFormatArg::Table => RowFormat::Table,
            RowFormatArg::Json => RowFormat::Json,
            RowFormatArg::Jsonl => RowFormat::Jsonl,
            RowFormatArg::Csv => RowFormat::Csv,
        })
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ReadFormat {
    /// A hex dump with ASCII
    Hex,
    /// One JSON object {address, physical, length, hex}
    Json,
    /// The bytes themselves
    Raw,
}

impl ReadFormat {
    /// The renderer of the hex dump and the JSON object (None: the raw bytes themselves).
    pub fn renderer(self) -> Option<Renderer> {
        match self {
            ReadFormat::Hex => Some(Renderer::new(RowFormat::Table)),
            ReadFormat::Json => Some(Renderer::new(RowFormat::Jsonl)),
            ReadFormat::Raw => None,
        }
    }
}

pub fn parse_u64(s: &str) -> Result<u64, String> {
    let t = s.replace('`', "");
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    r.map_err(|e| format!("not a number: {s} ({e})"))
}

/// Which records to list (all given filters must hold; a record whose value is not known
/// cannot be shown to match and is left out, counted in a warning).
#[derive(clap::Args)]
pub struct FilterArgs {
    /// Only records of these process ids (comma-separated or repeated)
    #[arg(long, value_delimiter = ',', value_name = "PID")]
    pid: Vec<u32>,
    /// Only records of these thread ids
    #[arg(long, value_delimiter = ',', value_name = "TID")]
    tid: Vec<u32>,
    /// Only records of these providers: a GUID or a name `providers` shows
    #[arg(long, value_name = "NAME|GUID")]
    provider: Vec<String>,
    /// Only records with these event ids (EVENT_HEADER) or message numbers (TRACE_MESSAGE)
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    event_id: Vec<u16>,
    /// Only kernel records with these hook ids (0x0524, 1316) or names (CONTEXTSWAP)
    #[arg(long, value_delimiter = ',', value_name = "HOOK")]
    hook: Vec<String>,
    /// Only records at or after this UTC time (YYYY-MM-DD[THH:MM:SS[.fffffff]][Z])
    #[arg(long, value_name = "TIME", value_parser = etwdump::time::parse_utc)]
    since: Option<u64>,
    /// Only records at or before this UTC time
    #[arg(long, value_name = "TIME", value_parser = etwdump::time::parse_utc)]
    until: Option<u64>,
    /// Only records of the last DURATION before the dump's SystemTime (e.g. 250ms, 2s, 5m)
    #[arg(long, value_name = "DURATION", value_parser = etwdump::time::parse_duration,
          conflicts_with = "since")]
    last: Option<u64>,
}

impl FilterArgs {
    /// Any filter given.
    pub fn any(&self) -> bool {
        !(self.pid.is_empty()
            && self.tid.is_empty()
            && self.provider.is_empty()
            && self.event_id.is_empty()
            && self.hook.is_empty())
            || self.since.is_some()
            || self.until.is_some()
            || self.last.is_some()
    }

    /// The filters a context-switch listing can apply (`etl --cswitch`): pid, tid, since,
    /// until and the `--last` window (100 ns units); an error naming a filter that applies
    /// to records only.
    pub fn switch_filter(
        &self,
    ) -> anyhow::Result<(etwdump::report::filter::SwitchFilter, Option<u64>)> {
        let only_events = [
            ("--provider", !self.provider.is_empty()),
            ("--event-id", !self.event_id.is_empty()),
            ("--hook", !self.hook.is_empty()),
        ];
        if let Some((name, _)) = only_events.iter().find(|(_, given)| *given) {
            anyhow::bail!("{name} selects records: it applies with --events, not --cswitch");
        }
        Ok((
            etwdump::report::filter::SwitchFilter {
                pids: self.pid.clone(),
                tids: self.tid.clone(),
                since: self.since,
                until: self.until,
            },
            self.last,
        ))
    }

    /// The library filter; `--last` counts back from `dump_time` (the dump's SystemTime, or
    /// why there is none to count from).
    pub fn filter(&self, dump_time: Result<u64, String>) -> anyhow::Result<EventFilter> {
        let mut providers = Vec::new();
        for p in &self.provider {
            providers.extend(filter::provider_guids(p)?);
        }
        let hooks = self
            .hook
            .iter()
            .map(|h| filter::hook_id(h))
            .collect::<Result<Vec<_>, _>>()?;
        let since = match (self.last, dump_time) {
            (None, _) => self.since,
            (Some(window), Ok(t)) => Some(t.saturating_sub(window)),
            (Some(_), Err(why)) => anyhow::bail!("--last: {why}; give --since instead"),
        };
        Ok(EventFilter {
            pids: self.pid.clone(),
            tids: self.tid.clone(),
            providers,
            event_ids: self.event_id.clone(),
            hooks,
            since,
            until: self.until,
        })
    }
}
