//! The commands' models: reports assembled from the lower layers (the renderers of
//! [`crate::render`] print them). Nothing here parses dump bytes itself.

pub mod buffers;
pub mod check;
pub mod cswitch;
pub mod etl;
pub mod events;
pub mod extract;
pub mod filter;
pub mod info;
pub mod overview;
pub mod providers;
pub mod read;
pub mod scan;
pub mod sessions;

pub mod symbols;

/// Output format of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

/// Output format of a per-record listing (`cswitch`, `events`): JSON Lines adds the
/// Timesketch fields `datetime`, `timestamp_desc` and `message` to every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowFormat {
    Table,
    Json,
    Jsonl,
    Csv,
}

/// `0x…` text for a value.
pub fn hex(v: u64) -> String {
    format!("{v:#x}")
}
