//! `etwdump providers`: the registered ETW providers, streamed.

use super::common::{finish, renderer, with_kernel};
use super::flags::{KernelArgs, RowFormatArg};
use etwdump::report::providers::{self, ProviderRow};
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Also the providers no session enables
    #[arg(long)]
    all: bool,
    /// jsonl: one JSON object per row (warnings as JSON lines on stderr)
    #[arg(long, value_enum, default_value = "table")]
    format: RowFormatArg,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let r = renderer(a.format);
    with_kernel(&a.kernel, |ctx| {
        let mut rows = r.listing::<_, ProviderRow>(out, "providers")?;
        let warnings = providers::stream(ctx, a.all, &mut |p| rows.row(p))?;
        finish(r, rows, &warnings)
    })
}
