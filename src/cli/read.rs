//! `etwdump read`: bytes at a virtual or physical address.

use super::common::{emit, open_with};
use super::flags::{parse_u64, DumpArgs, ReadFormat};
use etwdump::render::read::Read;
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    dump: DumpArgs,
    /// Address (hex with 0x prefix, or decimal)
    #[arg(value_parser = parse_u64)]
    address: u64,
    /// Number of bytes
    #[arg(value_parser = parse_u64)]
    length: u64,
    /// The address is physical
    #[arg(long)]
    physical: bool,
    #[arg(long, value_enum, default_value = "hex")]
    format: ReadFormat,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    // Physical reads need no page tables: an image without Windows opens too.
    let d = open_with(&a.dump, etwdump::kernel::discover::open_container)?;
    let space = d.space();
    let len = usize::try_from(a.length).unwrap_or(usize::MAX);
    let (report, bytes) = etwdump::report::read::read(&space, a.address, len, a.physical)?;
    match a.format.renderer() {
        Some(r) => {
            let read = Read {
                address: a.address,
                report: &report,
                bytes: &bytes,
            };
            emit(out, r, &read)
        }
        None => Ok(out.write_all(&bytes)?),
    }
}
