//! The etwdump command line: a thin layer over the library.

use clap::{CommandFactory, Parser, Subcommand};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::mem::AddressSpace;
use etwdump::render::rows::{Envelope, RowWriter};
use etwdump::render::{self};
use etwdump::report::buffers::BufferRow;
use etwdump::report::check::FindingRow;
use etwdump::report::cswitch::SwitchRow;
use etwdump::report::events::EventRow;
use etwdump::report::providers::ProviderRow;
use etwdump::report::{self, Format};
use etwdump::symbols::Symbols;
use etwdump::warning::Warning;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "etwdump",
    version,
    about = "Recover Event Tracing for Windows (ETW) data from Windows kernel crash dumps"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct DumpArgs {
    /// The crash dump (MEMORY.DMP, a kernel minidump, ...)
    dump: PathBuf,
    /// Refuse a dump whose page data is cut short (by default it is read, as WinDbg does,
    /// with one warning, and pages past the end of the file are "not in the dump")
    #[arg(long)]
    strict: bool,
    /// Accepted for compatibility: truncated dumps are read by default now
    #[arg(long, hide = true)]
    allow_truncated: bool,
    /// Read the file as placed by this physical-memory layout (JSON, written by a host
    /// framework such as the Volatility 3 plugins: physical ranges, and optionally the
    /// architecture and page-table root it found; README "Layouts from a host framework")
    #[arg(long, value_name = "FILE")]
    layout: Option<PathBuf>,
}

#[derive(clap::Args, Default)]
struct SymbolArgs {
    /// The kernel's PDB (ntkrnlmp.pdb, ntkrpamp.pdb, ntoskrnl.pdb)
    #[arg(long, value_name = "FILE", conflicts_with = "isf")]
    pdb: Option<PathBuf>,
    /// A Volatility 3 ISF file (.json or .json.xz)
    #[arg(long, value_name = "FILE")]
    isf: Option<PathBuf>,
    /// A local symbol store (DIR/ntkrnlmp.pdb/<GUID><AGE>/ntkrnlmp.pdb, or Volatility's
    /// DIR/windows/ntkrnlmp.pdb/<GUID>-<AGE>.json.xz); repeatable. The local directories of
    /// _NT_SYMBOL_PATH are searched too
    #[arg(long = "symbols", value_name = "DIR")]
    stores: Vec<PathBuf>,
    /// Use the symbols even when they do not match the dump's kernel
    #[arg(long)]
    force: bool,
    /// Fetch the kernel's PDB from this symbol server (e.g.
    /// https://msdl.microsoft.com/download/symbols) when no local store has it; repeatable.
    /// Never without this option or --fetch-symbols
    #[arg(long = "symbol-server", value_name = "URL")]
    servers: Vec<String>,
    /// Where fetched PDBs are kept (the Microsoft layout; default: the first --symbols DIR,
    /// else $XDG_CACHE_HOME/etwdump/symbols or ~/.cache/etwdump/symbols)
    #[arg(long = "symbol-cache", value_name = "DIR")]
    symbol_cache: Option<PathBuf>,
    /// Also fetch through the srv*CACHE*URL entries of _NT_SYMBOL_PATH (by default only their
    /// local caches are searched)
    #[arg(long)]
    fetch_symbols: bool,
}

impl SymbolArgs {
    fn options(&self) -> SymbolOptions {
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

#[derive(Subcommand)]
enum Command {
    /// A shell completion script on stdout (e.g. `etwdump completions bash >
    /// ~/.local/share/bash-completion/completions/etwdump`)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The manual page (roff) on stdout, every command and option (`etwdump manpage >
    /// etwdump.1; man ./etwdump.1`)
    Manpage,
    /// The first look: the dump, its ETW sessions with the buffers found for each, and each
    /// CPU's last context switches before the dump (UTC times, processes); warnings counted
    Overview {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Switches shown per CPU (at most 1000)
        #[arg(long, default_value_t = 5)]
        switches: usize,
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
    },
    /// What the dump is: architecture, dump type, Windows build, bug check, kernel and its PDB
    Info {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
    },
    /// The ETW sessions (loggers) active when the dump was taken
    Sessions {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormatArg,
    },
    /// Every trace buffer the sessions still hold in memory
    Buffers {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Only this session (logger id or name)
        #[arg(long)]
        session: Option<String>,
        /// jsonl: one JSON object per buffer (warnings as JSON lines on stderr)
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormatArg,
    },
    /// The registered ETW providers (the kernel's GUID table): GUID, name, each registration
    /// (kernel, or the registering process) and the sessions enabling it (level, keywords)
    Providers {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Also the providers no session enables
        #[arg(long)]
        all: bool,
        /// jsonl: one JSON object per row (warnings as JSON lines on stderr)
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormatArg,
    },
    /// Tamper checks: the kernel's provider handles, provider enable state, sessions'
    /// GetCpuClock and consumers, and each process's ntdll EtwEventWrite family, against what
    /// a clean system holds (README "Providers and tamper checks")
    Check {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// json adds "checks" (each check: examined, findings, limit) to the envelope
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormatArg,
    },
    /// Write each session's in-memory buffers as an .etl file, plus manifest.json
    Extract {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Output directory (created if needed)
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Only this session (logger id or name)
        #[arg(long)]
        session: Option<String>,
        /// Replace ETL files and manifest.json already in the output directory
        #[arg(long)]
        overwrite: bool,
    },
    /// Every trace buffer, pending CCSWAP block and logger context in physical memory, live or
    /// not: one pass over all memory; orphans (stopped sessions' memory) grouped into sessions
    Scan {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Threads reading memory (default: every core)
        #[arg(long)]
        threads: Option<usize>,
        /// Also write each group of orphaned buffers as an .etl file in DIR, with manifest.json
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        output: Option<PathBuf>,
        /// Replace existing files in DIR
        #[arg(long)]
        overwrite: bool,
        /// jsonl: one JSON object per row (warnings as JSON lines on stderr)
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormatArg,
    },
    /// Context switches per CPU in UTC order: pending (never flushed) CCSWAP blocks, and 0x0525
    /// batches and 0x0524 events in the recovered buffers, with UTC times and process names;
    /// one row per switch, listing every session's record of it (`--per-record`: one row per
    /// record)
    Cswitch {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Only this CPU
        #[arg(long)]
        cpu: Option<u64>,
        /// Only the switches of the last DURATION before the dump (e.g. 250ms, 2s, 1.5s)
        #[arg(long, value_name = "DURATION", value_parser = etwdump::time::parse_duration)]
        last: Option<u64>,
        /// Also draw a per-CPU lane chart to this SVG file
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Read the buffers that nothing leads to any more (orphaned and stale copies, found
        /// by `scan`) instead of the live sessions'
        #[arg(long)]
        carved: bool,
        /// JSON Lines: keep switches without a known time (by default they are left out, with a
        /// count: Timesketch cannot place a line without a time)
        #[arg(long)]
        keep_untimed: bool,
        /// One row per record, as before issue 26: a switch traced by two sessions (a CSwitch
        /// event and a compact batch or pending block) is two rows. By default it is one row
        /// whose `sources` list every record that saw it (same CPU, same old and new thread,
        /// UTC times within the clocks' resolutions; README "Context switches")
        #[arg(long)]
        per_record: bool,
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormatArg,
    },
    /// One row per ETW record in the dump's buffers (full, bitmap and triage dumps: the saved
    /// windows and the ETW secondary data), with hook names, providers, UTC times and
    /// interrupt/DPC routines resolved to module+offset
    Events {
        #[command(flatten)]
        dump: DumpArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Only this session (logger id or name)
        #[arg(long)]
        session: Option<String>,
        /// Read the buffers that nothing leads to any more (orphaned and stale copies, found
        /// by `scan`) instead of the live sessions'
        #[arg(long, conflicts_with = "session")]
        carved: bool,
        /// JSON Lines: keep records without a known time (by default they are left out, with a
        /// count: Timesketch cannot place a line without a time)
        #[arg(long)]
        keep_untimed: bool,
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormatArg,
    },
    /// Walk the buffers and records of an .etl file
    Etl {
        /// The .etl file
        file: PathBuf,
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
    },
    /// Structure layouts and global symbols as etwdump reads them from a PDB or ISF file
    /// (or, given a dump, from the symbols resolved for its kernel)
    Symbols {
        /// A crash dump whose kernel's symbols to resolve (optional)
        dump: Option<PathBuf>,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Structures to show (default: those the tool reads)
        #[arg(long, value_delimiter = ',')]
        types: Vec<String>,
        /// List every global symbol, not only those the tool uses
        #[arg(long)]
        all_symbols: bool,
        /// For built-in layouts without a dump: the NT build number
        #[arg(long)]
        build: Option<u32>,
        /// For built-in layouts without a dump: 32-bit x86
        #[arg(long)]
        x86: bool,
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
    },
    /// Bytes at a virtual (default) or physical address
    Read {
        #[command(flatten)]
        dump: DumpArgs,
        /// Address (hex with 0x prefix, or decimal)
        #[arg(value_parser = parse_u64)]
        address: u64,
        /// Number of bytes
        #[arg(value_parser = parse_u64)]
        length: u64,
        /// The address is physical
        #[arg(long)]
        physical: bool,
        #[arg(long, value_enum, default_value = "hex")]
        format: ReadFormat,
    },
}

/// `--format` of `info`, `etl` and `symbols`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    Table,
    Json,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
        }
    }
}

/// `--format` of `sessions` and `buffers`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ListFormatArg {
    Table,
    /// {format_version, command, records, warnings} (README "Output contract")
    Json,
    Csv,
}

impl From<ListFormatArg> for report::ListFormat {
    fn from(f: ListFormatArg) -> report::ListFormat {
        match f {
            ListFormatArg::Table => report::ListFormat::Table,
            ListFormatArg::Json => report::ListFormat::Json,
            ListFormatArg::Csv => report::ListFormat::Csv,
        }
    }
}

/// `--format` of `cswitch` and `events`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum RowFormatArg {
    Table,
    /// {format_version, command, records, warnings} (README "Output contract")
    Json,
    /// One JSON object per row with the Timesketch fields; warnings as JSON lines on stderr
    Jsonl,
    Csv,
}

impl From<RowFormatArg> for report::RowFormat {
    fn from(f: RowFormatArg) -> report::RowFormat {
        match f {
            RowFormatArg::Table => report::RowFormat::Table,
            RowFormatArg::Json => report::RowFormat::Json,
            RowFormatArg::Jsonl => report::RowFormat::Jsonl,
            RowFormatArg::Csv => report::RowFormat::Csv,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ReadFormat {
    /// A hex dump with ASCII
    Hex,
    /// One JSON object {address, physical, length, hex}
    Json,
    /// The bytes themselves
    Raw,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let t = s.replace('`', "");
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    r.map_err(|e| format!("not a number: {s} ({e})"))
}

fn open(a: &DumpArgs) -> anyhow::Result<DumpFile> {
    open_with(a, etwdump::kernel::discover::open)
}

/// Open with `how`: [`etwdump::kernel::discover::open`] (every command but `info`) or
/// `open_container` (`info`: an ELF or VMware image without Windows is still described).
fn open_with(
    a: &DumpArgs,
    how: fn(&Path, OpenOptions) -> Result<DumpFile, etwdump::dump::DumpError>,
) -> anyhow::Result<DumpFile> {
    let opts = OpenOptions {
        allow_truncated: !a.strict || a.allow_truncated,
    };
    // Crash dumps and memory images; an image's architecture and DTB are found here.
    let d = match &a.layout {
        Some(l) => {
            let layout = etwdump::dump::layout::Layout::read(l)
                .map_err(|e| anyhow::anyhow!("{}: {e}", display(l)))?;
            etwdump::kernel::discover::open_with_layout(&a.dump, &layout, opts)
        }
        None => how(&a.dump, opts),
    }
    .map_err(|e| anyhow::anyhow!("{}: {e}", display(&a.dump)))?;
    // One prominent line per command, whatever it reads afterwards.
    if let Some(t) = d.truncation() {
        warn(&format!(
            "TRUNCATED DUMP ({}): {t}; whatever lies past the end is reported as not in the dump (--strict refuses such dumps)",
            display(&a.dump)
        ));
    }
    // A memory image's layout warnings (a partial last page, memory a layout places past
    // the data, page tables naming pages beyond the image) concern every command.
    if d.image().is_some() {
        for w in d
            .warnings()
            .iter()
            .filter(|w| !w.starts_with("truncated dump"))
        {
            warn(&format!("IMAGE ({}): {w}", display(&a.dump)));
        }
    }
    Ok(d)
}

/// A `--session` selector that names no session is an error, listing the sessions there are.
fn require_session(ctx: &KernelContext<'_>, sel: Option<&str>) -> anyhow::Result<()> {
    let Some(sel) = sel else { return Ok(()) };
    let src = etwdump::etw::source::EtwSource::open_sessions(ctx);
    let known: Vec<(Option<u64>, Option<etwdump::text::Untrusted>)> = src
        .sessions()
        .iter()
        .map(|s| (s.logger_id, s.name().cloned()))
        .collect();
    if src.sessions().iter().any(|s| s.selected(Some(sel))) {
        return Ok(());
    }
    let list = known
        .iter()
        .map(|(id, name)| {
            format!(
                "{} {}",
                id.map_or("?".into(), |i| i.to_string()),
                etwdump::text::shown_or(name.as_ref(), "(unreadable)")
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    anyhow::bail!(
        "--session {}: no such session (by logger id or exact name); the sessions are: {}",
        render::text::printable(sel),
        if list.is_empty() { "none".into() } else { list }
    )
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // Buffered: listings of millions of rows are written as they are decoded.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match cli.command {
        Command::Info {
            dump,
            symbols,
            format,
        } => {
            let format = Format::from(format);
            let d = open_with(&dump, etwdump::kernel::discover::open_container)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            let r = report::info::info_with(&ctx);
            match format {
                Format::Table => write!(out, "{}", etwdump::text::escape_lines(&r.to_table()))?,
                Format::Json => writeln!(out, "{}", render::rows::to_json_pretty(&r)?)?,
            }
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "etwdump", &mut out);
        }
        Command::Manpage => {
            // The main page, then one section per command (clap_mangen renders one command
            // per page: the commands' pages follow as sections of the same file).
            let cmd = Cli::command();
            clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
            for sub in cmd.get_subcommands() {
                let name = format!("etwdump-{}", sub.get_name());
                let page =
                    clap_mangen::Man::new(sub.clone().display_name(name.clone()).bin_name(name));
                page.render_name_section(&mut out)?;
                page.render_synopsis_section(&mut out)?;
                page.render_description_section(&mut out)?;
                page.render_options_section(&mut out)?;
            }
        }
        Command::Overview {
            dump,
            symbols,
            switches,
            format,
        } => {
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            let o = report::overview::Overview::build(&ctx, switches)?;
            match Format::from(format) {
                Format::Table => write!(
                    out,
                    "{}",
                    etwdump::text::escape_lines(&render::overview::to_table(&o))
                )?,
                Format::Json => writeln!(out, "{}", render::overview::to_json(&o)?)?,
            }
        }
        Command::Sessions {
            dump,
            symbols,
            format,
        } => {
            let format = report::ListFormat::from(format);
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            let rep = report::sessions::Sessions::open(&ctx);
            match format {
                report::ListFormat::Table => write!(
                    out,
                    "{}",
                    etwdump::text::escape_lines(&render::sessions::to_table(&rep))
                )?,
                report::ListFormat::Json => writeln!(
                    out,
                    "{}",
                    render::rows::to_json_pretty(&Envelope::new(
                        "sessions",
                        &rep.records(),
                        &rep.warnings
                    ))?
                )?,
                report::ListFormat::Csv => {
                    write!(out, "{}", render::sessions::to_csv(&rep))?;
                    // Warnings go to stderr so stdout stays machine-readable.
                    warn_all(&rep.warnings, false);
                }
            }
        }
        Command::Buffers {
            dump,
            symbols,
            session,
            format,
        } => {
            let format = report::RowFormat::from(format);
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            require_session(&ctx, session.as_deref())?;
            let mut rw = RowWriter::<_, BufferRow>::new(&mut out, format, "buffers")?;
            let warnings = report::buffers::stream(&ctx, session.as_deref(), &mut |r| rw.row(r))?;
            rw.finish(&warnings)?;
            if format != report::RowFormat::Json {
                warn_all(&warnings, format == report::RowFormat::Jsonl);
            }
        }
        Command::Providers {
            dump,
            symbols,
            all,
            format,
        } => {
            let format = report::RowFormat::from(format);
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            let mut rw = RowWriter::<_, ProviderRow>::new(&mut out, format, "providers")?;
            let warnings = report::providers::stream(&ctx, all, &mut |r| rw.row(r))?;
            rw.finish(&warnings)?;
            if format != report::RowFormat::Json {
                warn_all(&warnings, format == report::RowFormat::Jsonl);
            }
        }
        Command::Check {
            dump,
            symbols,
            format,
        } => {
            let format = report::RowFormat::from(format);
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            let rep = report::check::run(&ctx);
            if format == report::RowFormat::Json {
                let v = serde_json::json!({
                    "format_version": etwdump::render::rows::FORMAT_VERSION,
                    "command": "check",
                    "records": rep.findings,
                    "checks": rep.runs,
                    "warnings": rep.warnings,
                });
                let mut t = serde_json::to_vec_pretty(&v)?;
                etwdump::render::text::json_terminal_safe(&mut t);
                out.write_all(&t)?;
                out.write_all(b"\n")?;
            } else {
                let mut rw = RowWriter::<_, FindingRow>::new(&mut out, format, "check")?;
                for f in &rep.findings {
                    rw.row(f)?;
                }
                let out = rw.finish(&rep.warnings)?;
                if format == report::RowFormat::Table {
                    writeln!(out)?;
                    for l in report::check::summary(&rep.runs) {
                        writeln!(out, "{l}")?;
                    }
                }
                warn_all(&rep.warnings, format == report::RowFormat::Jsonl);
            }
        }
        Command::Extract {
            dump,
            symbols,
            output,
            session,
            overwrite,
        } => {
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            require_session(&ctx, session.as_deref())?;
            let m = report::extract::extract(
                &ctx,
                &display(&dump.dump),
                &output,
                session.as_deref(),
                overwrite,
            )?;
            for s in &m.sessions {
                writeln!(
                    out,
                    "{}: {} buffers, {} records, {} bytes, sha256 {}",
                    output.join(&s.file).display(),
                    s.buffers,
                    s.records,
                    s.bytes,
                    s.sha256
                )?;
            }
            writeln!(out, "{}", output.join("manifest.json").display())?;
            warn_all(&m.warnings, false);
        }
        Command::Scan {
            dump,
            symbols,
            threads,
            output,
            overwrite,
            format,
        } => {
            let format = report::RowFormat::from(format);
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            let threads = threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
                .clamp(1, 64);
            let progress = etwdump::etw::carve::Progress::default();
            let scan = std::thread::scope(|s| {
                let bar = s.spawn(|| progress_bar(&progress));
                let r = report::scan::Scan::run(&ctx, threads, &progress);
                progress
                    .stop
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                let _ = bar.join();
                r
            });
            let mut rw = RowWriter::<_, report::scan::ScanRow>::new(&mut out, format, "scan")?;
            for r in scan.rows() {
                rw.row(&r)?;
            }
            rw.finish(scan.warnings())?;
            if format != report::RowFormat::Json {
                warn_all(scan.warnings(), format == report::RowFormat::Jsonl);
            }
            if let Some(dir) = output {
                let m = scan.extract(&ctx, &display(&dump.dump), &dir, overwrite)?;
                for s in &m.sessions {
                    eprintln!(
                        "{}: {} carved buffers, {} records, sha256 {}",
                        dir.join(&s.file).display(),
                        s.buffers,
                        s.records,
                        s.sha256
                    );
                }
            }
        }
        Command::Cswitch {
            dump,
            symbols,
            cpu,
            last,
            svg,
            carved,
            keep_untimed,
            per_record,
            format,
        } => {
            let format = report::RowFormat::from(format);
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            let last = last.map(|window| report::cswitch::Last {
                window,
                end: ctx.system_time(),
            });
            let warnings = match &svg {
                Some(path) => {
                    // The chart needs every row at once: collect them, draw, then list them.
                    let mut rows = Vec::new();
                    let w = report::cswitch::stream_with(
                        &ctx,
                        source(&ctx, carved),
                        cpu,
                        last,
                        per_record,
                        &mut |r| {
                            rows.push(r.clone());
                            Ok(())
                        },
                    )?;
                    let name = dump
                        .dump
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let chart = render::svg::render(
                        &rows,
                        &render::svg::Chart {
                            dump_time: ctx.system_time().unwrap_or(0),
                            dump: &name,
                        },
                    );
                    std::fs::write(path, &chart.svg)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", display(path)))?;
                    let mut rw = RowWriter::<_, SwitchRow>::new(&mut out, format, "cswitch")?
                        .keep_untimed(keep_untimed);
                    for r in &rows {
                        rw.row(r)?;
                    }
                    let mut w = w;
                    if chart.spans == 0 {
                        w.push(etwdump::warning::Warning::new(
                            etwdump::warning::WarningKind::NotFound,
                            format!(
                                "{}: no context switch with a UTC time that fits the dump to draw ({} switches listed); the chart says so",
                                display(path),
                                rows.len()
                            ),
                        ));
                    }
                    w.extend(rw.untimed_warning());
                    rw.finish(&w)?;
                    w
                }
                None => {
                    let mut rw = RowWriter::<_, SwitchRow>::new(&mut out, format, "cswitch")?
                        .keep_untimed(keep_untimed);
                    let mut w = report::cswitch::stream_with(
                        &ctx,
                        source(&ctx, carved),
                        cpu,
                        last,
                        per_record,
                        &mut |r| rw.row(r),
                    )?;
                    w.extend(rw.untimed_warning());
                    rw.finish(&w)?;
                    w
                }
            };
            if format != report::RowFormat::Json {
                warn_all(&warnings, format == report::RowFormat::Jsonl);
            }
        }
        Command::Events {
            dump,
            symbols,
            session,
            carved,
            keep_untimed,
            format,
        } => {
            let format = report::RowFormat::from(format);
            let d = open(&dump)?;
            let ctx = KernelContext::open(&d, &symbols.options())?;
            require_session(&ctx, session.as_deref())?;
            let mut rw = RowWriter::<_, EventRow>::new(&mut out, format, "events")?
                .keep_untimed(keep_untimed);
            let src = if carved {
                source(&ctx, true)
            } else {
                etwdump::etw::source::EtwSource::open(&ctx, session.as_deref())
            };
            let mut warnings = report::events::stream_from(&ctx, src, &mut |r| rw.row(r))?;
            warnings.extend(rw.untimed_warning());
            rw.finish(&warnings)?;
            if format != report::RowFormat::Json {
                warn_all(&warnings, format == report::RowFormat::Jsonl);
            }
        }
        Command::Etl { file, format } => {
            let format = Format::from(format);
            let bytes =
                std::fs::read(&file).map_err(|e| anyhow::anyhow!("{}: {e}", display(&file)))?;
            let f = etwdump::etl::reader::read(&bytes);
            if let Some(why) = etwdump::etl::reader::not_an_etl(&bytes, &f) {
                anyhow::bail!("{}: not an ETL file: {why}", display(&file));
            }
            match format {
                Format::Json => writeln!(
                    out,
                    "{}",
                    render::rows::to_json_pretty(
                        &serde_json::json!({"file": display(&file), "buffers": f.buffers, "problem": f.problem})
                    )?
                )?,
                Format::Table => {
                    writeln!(
                        out,
                        "{:>10} {:>8} {:>8} {:>5} {:>8} {:>8}",
                        "offset", "size", "saved", "type", "records", "trimmed"
                    )?;
                    for b in &f.buffers {
                        writeln!(
                            out,
                            "{:>#10x} {:>#8x} {:>#8x} {:>5} {:>8} {:>8}",
                            b.offset,
                            b.buffer_size,
                            b.saved_offset,
                            b.buffer_type,
                            b.records,
                            b.trimmed_bytes
                        )?;
                    }
                    if let Some(p) = &f.problem {
                        writeln!(out, "warning: {}", etwdump::text::escape(p))?;
                    }
                }
            }
        }
        Command::Symbols {
            dump,
            symbols,
            types,
            all_symbols,
            build,
            x86,
            format,
        } => {
            let format = Format::from(format);
            let wanted: Vec<&str> = if types.is_empty() {
                etwdump::symbols::WANTED_TYPES.to_vec()
            } else {
                types.iter().map(String::as_str).collect()
            };
            let rep = match dump {
                Some(p) => {
                    let d = open(&DumpArgs {
                        dump: p,
                        strict: false,
                        allow_truncated: false,
                        layout: None,
                    })?;
                    let ctx = KernelContext::open(&d, &symbols.options())?;
                    report::symbols::report(&ctx.symbols, &wanted, all_symbols)
                }
                None => {
                    let sym = if let Some(p) = &symbols.pdb {
                        Symbols::from_pdb(p, &wanted)?
                    } else if let Some(p) = &symbols.isf {
                        Symbols::from_isf(p, &wanted)?
                    } else if build.is_some() {
                        Symbols::none(if x86 { 4 } else { 8 })
                    } else {
                        anyhow::bail!("give --pdb FILE, --isf FILE, --build N, or a dump");
                    };
                    let sym = match build {
                        Some(b) => sym.with_builtin(b, !x86),
                        None => sym,
                    };
                    report::symbols::report(&sym, &wanted, all_symbols)
                }
            };
            match format {
                Format::Table => write!(out, "{}", etwdump::text::escape_lines(&rep.to_table()))?,
                Format::Json => writeln!(out, "{}", render::rows::to_json_pretty(&rep)?)?,
            }
        }
        Command::Read {
            dump,
            address,
            length,
            physical,
            format,
        } => {
            // Physical reads need no page tables: an image without Windows opens too.
            let d = open_with(&dump, etwdump::kernel::discover::open_container)?;
            let space = AddressSpace::kernel(&d);
            let len = usize::try_from(length).unwrap_or(usize::MAX);
            let (rep, bytes) = report::read::read(&space, address, len, physical)?;
            match format {
                ReadFormat::Hex => write!(out, "{}", render::read::hexdump(address, &bytes))?,
                ReadFormat::Json => writeln!(out, "{}", serde_json::to_string(&rep)?)?,
                ReadFormat::Raw => out.write_all(&bytes)?,
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// The ETW source of a command: the live sessions', or (`--carved`) the buffers that nothing
/// leads to any more, found by a pass over all physical memory on every core.
fn source<'c, 'd>(
    ctx: &'c KernelContext<'d>,
    carved: bool,
) -> etwdump::etw::source::EtwSource<'c, 'd> {
    if carved {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        etwdump::etw::source::EtwSource::open_carved(ctx, threads)
    } else {
        etwdump::etw::source::EtwSource::open(ctx, None)
    }
}

/// A progress bar on stderr while `p` runs, when stderr is a terminal (silent otherwise);
/// returns when `p.stop` is set.
fn progress_bar(p: &etwdump::etw::carve::Progress) {
    use std::io::IsTerminal;
    use std::sync::atomic::Ordering;
    let tty = std::io::stderr().is_terminal();
    let bar = tty.then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "scan {bar:40} {pos}/{len} pages ({per_sec}, {eta} left)",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    while !p.stop.load(Ordering::Relaxed) {
        if let Some(b) = &bar {
            b.set_length(p.total.load(Ordering::Relaxed));
            b.set_position(p.done.load(Ordering::Relaxed));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

/// One warning on stderr, with text from memory made safe for a terminal.
fn warn(w: &str) {
    eprintln!("warning: {}", render::text::printable(w));
}

/// Warnings on stderr: `warning: <message>` lines, or (JSON Lines output) one JSON object
/// per warning, machine-readable like the rows on stdout.
fn warn_all(warnings: &[Warning], json: bool) {
    for w in warnings {
        if json {
            if let Ok(mut line) = serde_json::to_vec(w) {
                render::text::json_terminal_safe(&mut line);
                eprintln!("{}", String::from_utf8_lossy(&line));
            }
        } else {
            warn(&w.message);
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed pipe (`etwdump ... | head`) is not an error worth a message.
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    return ExitCode::SUCCESS;
                }
            }
            // Errors quote the input (names, tags, paths from a server): one escaped line.
            eprintln!("etwdump: error: {}", etwdump::text::escape(&e.to_string()));
            ExitCode::from(2)
        }
    }
}
