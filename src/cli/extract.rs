//! `etwdump extract`: each session's buffers as an .etl file, plus manifest.json.

use super::common::{display, emit, overwrite_hint, with_session};
use super::flags::{KernelArgs, SessionArg};
use etwdump::render::extract::Written;
use etwdump::render::output::Renderer;
use etwdump::report::RowFormat;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Output directory (created if needed)
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    #[command(flatten)]
    session: SessionArg,
    /// Replace ETL files and manifest.json already in the output directory
    #[arg(long)]
    overwrite: bool,
    /// Do not compute the files' SHA-256 (manifest.json's sha256 is then null): faster when
    /// the dump is in the page cache, where hashing (about 1.2 GB/s per core) is the bound
    #[arg(long)]
    no_hash: bool,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    with_session(&a.kernel, &a.session, |ctx, session| {
        let name = display(&a.kernel.dump.dump);
        let m = etwdump::report::extract::extract_with(
            ctx,
            &name,
            &a.output,
            session,
            a.overwrite,
            !a.no_hash,
        )
        .map_err(overwrite_hint)?;
        let written = Written {
            dir: &a.output,
            manifest: &m,
        };
        emit(out, Renderer::new(RowFormat::Table), &written)
    })
}
