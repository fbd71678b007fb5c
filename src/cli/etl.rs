//! `etwdump etl`: the buffers and records of an .etl file.

use super::common::{display, emit};
use super::flags::FormatArg;
use etwdump::etl::reader;
use etwdump::report::etl::EtlReport;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The .etl file
    file: PathBuf,
    #[arg(long, value_enum, default_value = "table")]
    format: FormatArg,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let name = display(&a.file);
    let bytes = std::fs::read(&a.file).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let f = reader::read(&bytes);
    if let Some(why) = reader::not_an_etl(&bytes, &f) {
        anyhow::bail!("{name}: not an ETL file: {why}");
    }
    emit(out, a.format.into(), &EtlReport::new(name, f))
}
