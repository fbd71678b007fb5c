//! `etwdump symbols`: structure layouts and globals as etwdump reads them.

use super::common::{emit, with_kernel_by};
use super::flags::{DumpArgs, FormatArg, SymbolArgs};
use etwdump::report::symbols::{report, SymbolsReport};
use etwdump::symbols::{Globals, Symbols, TableFamily};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let wanted: Vec<&str> = if a.types.is_empty() {
        etwdump::symbols::WANTED_TYPES.to_vec()
    } else {
        a.types.iter().map(String::as_str).collect()
    };
    let rep = match &a.dump {
        Some(p) => {
            let dump = DumpArgs {
                dump: p.clone(),
                strict: false,
                allow_truncated: false,
                layout: None,
            };
            with_kernel_by(etwdump::kernel::discover::open, &dump, &a.symbols, |ctx| {
                Ok(report(&ctx.symbols, &wanted, a.all_symbols))
            })?
        }
        None => without_dump(&a, &wanted)?,
    };
    emit(out, a.format.into(), &rep)?;
    // Not freed either (see `without_dump`).
    std::mem::forget(rep);
    Ok(())
}

/// The symbols of a PDB or ISF file, or the built-in layouts of a build.
fn without_dump(a: &Args, wanted: &[&str]) -> anyhow::Result<SymbolsReport> {
    let s = &a.symbols;
    let sym = if let Some(p) = &s.pdb {
        // The report lists the tool's globals unless all are asked for.
        let globals = if a.all_symbols {
            Globals::All
        } else {
            Globals::Tool
        };
        Symbols::from_pdb_keeping(p, wanted, globals)?
    } else if let Some(p) = &s.isf {
        Symbols::from_isf(p, wanted)?
    } else if a.build.is_some() {
        Symbols::none(if a.x86 { 4 } else { 8 })
    } else {
        anyhow::bail!("give --pdb FILE, --isf FILE, --build N, or a dump");
    };
    let sym = match a.build {
        Some(b) => {
            let family = if a.x86 {
                TableFamily::X86
            } else {
                TableFamily::X64
            };
            sym.with_builtin(b, family)
        }
        None => sym,
    };
    let rep = report(&sym, wanted, a.all_symbols);
    // Not freed: the process ends after printing the report, and freeing the layouts' many
    // small allocations one by one took about 2 % of a `symbols --pdb` run (docs/performance.md).
    std::mem::forget(sym);
    Ok(rep)
}
