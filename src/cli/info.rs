//! `etwdump info`: what the dump is.

use super::common::{emit, with_kernel_by};
use super::flags::{FormatArg, KernelArgs};
use std::io::Write;

// (No doc comment: the command's help is its variant's in main.rs.)
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    #[arg(long, value_enum, default_value = "table")]
    format: FormatArg,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    // An ELF or VMware image without Windows is still described.
    let how = etwdump::kernel::discover::open_container;
    with_kernel_by(how, &a.kernel.dump, &a.kernel.symbols, |ctx| {
        emit(out, a.format.into(), &etwdump::report::info::info_with(ctx))
    })
}
