//! `etwdump buffers`: every trace buffer the sessions hold, streamed.

use super::common::{finish, renderer, with_session};
use super::flags::{KernelArgs, RowFormatArg, SessionArg};
use etwdump::report::buffers::{self, BufferRow};
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    #[command(flatten)]
    session: SessionArg,
    /// jsonl: one JSON object per buffer (warnings as JSON lines on stderr)
    #[arg(long, value_enum, default_value = "table")]
    format: RowFormatArg,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let r = renderer(a.format);
    with_session(&a.kernel, &a.session, |ctx, session| {
        let mut rows = r.listing::<_, BufferRow>(out, "buffers")?;
        let warnings = buffers::stream(ctx, session, &mut |b| rows.row(b))?;
        finish(r, rows, &warnings)
    })
}
