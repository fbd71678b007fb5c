//! `etwdump overview`: the first look at a dump.

use super::common::{emit, with_kernel};
use super::flags::{FormatArg, KernelArgs};
use etwdump::report::overview::Overview;
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Switches shown per CPU (at most 1000)
    #[arg(long, default_value_t = 5)]
    switches: usize,
    #[arg(long, value_enum, default_value = "table")]
    format: FormatArg,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    with_kernel(&a.kernel, |ctx| {
        emit(out, a.format.into(), &Overview::build(ctx, a.switches)?)
    })
}
