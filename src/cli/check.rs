//! `etwdump check`: the tamper checks.

use super::common::{emit, renderer, with_kernel};
use super::flags::{KernelArgs, RowFormatArg};
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    /// json adds "checks" (each check: examined, findings, limit) to the envelope
    #[arg(long, value_enum, default_value = "table")]
    format: RowFormatArg,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let r = renderer(a.format);
    with_kernel(&a.kernel, |ctx| {
        emit(out, r, &etwdump::report::check::run(ctx))
    })
}
