//! The etwdump command line: a thin layer over the library.

use clap::{Parser, Subcommand};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::mem::AddressSpace;
use etwdump::report::{self, Format};
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
    /// Read a dump whose page data is cut short; missing pages read as absent
    #[arg(long)]
    allow_truncated: bool,
}

#[derive(Subcommand)]
enum Command {
    /// What the dump is: architecture, dump type, Windows build, bug check, kernel and its PDB
    Info {
        #[command(flatten)]
        dump: DumpArgs,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
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
    let opts = OpenOptions {
        allow_truncated: a.allow_truncated,
    };
    DumpFile::open(&a.dump, opts).map_err(|e| anyhow::anyhow!("{}: {e}", display(&a.dump)))
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match cli.command {
        Command::Info { dump, format } => {
            let d = open(&dump)?;
            let r = report::info::info(&d);
            match format {
                Format::Table => write!(out, "{}", r.to_table())?,
                Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?,
            }
        }
        Command::Read {
            dump,
            address,
            length,
            physical,
            format,
        } => {
            let d = open(&dump)?;
            let space = AddressSpace::kernel(&d);
            let len = usize::try_from(length).unwrap_or(usize::MAX);
            let (rep, bytes) = report::read::read(&space, address, len, physical)?;
            match format {
                ReadFormat::Hex => write!(out, "{}", report::read::hexdump(address, &bytes))?,
                ReadFormat::Json => writeln!(out, "{}", serde_json::to_string(&rep)?)?,
                ReadFormat::Raw => out.write_all(&bytes)?,
            }
        }
    }
    out.flush()?;
    Ok(())
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
            eprintln!("etwdump: error: {e}");
            ExitCode::from(2)
        }
    }
}
