//! What the commands print: reports assembled from the lower layers, rendered as a table or
//! JSON. Nothing here parses dump bytes itself.

pub mod buffers;
pub mod cswitch;
pub mod extract;
pub mod info;
pub mod read;
pub mod sessions;
pub mod svg;
pub mod symbols;

/// Output format of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// Output format of a listing command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
    Csv,
}

/// `0x…` text for a value.
pub fn hex(v: u64) -> String {
    format!("{v:#x}")
}
