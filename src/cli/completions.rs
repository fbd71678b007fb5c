//! `etwdump completions`: a shell completion script.

use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// The script for the command line `cli` on `out`.
pub fn run(a: Args, mut cli: clap::Command, out: &mut dyn Write) -> anyhow::Result<()> {
    clap_complete::generate(a.shell, &mut cli, "etwdump", out);
    Ok(())
}
