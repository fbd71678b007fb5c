//! `etwdump sessions`: the ETW sessions active when the dump was taken.

use super::common::{emit, with_kernel};
use super::flags::{KernelArgs, ListFormatArg};
use etwdump::report::sessions::Sessions;
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    #[arg(long, value_enum, default_value = "table")]
    format: ListFormatArg,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    with_kernel(&a.kernel, |ctx| {
        emit(out, a.format.into(), &Sessions::open(ctx))
    })
}
