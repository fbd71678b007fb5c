//! The commands' models: reports assembled from the lower layers (the renderers of
//! [`crate::render`] print them). Nothing here parses dump bytes itself.

pub mod buffers;
pub mod check;
pub mod collect;
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

/// Version of the JSON output contract (docs/output-contract.md), carried with `command` by
/// every JSON document etwdump writes.
/// 2: `cswitch` and `events` rows give the raw clock value as `raw_timestamp` (was
/// `timestamp`), and their JSON Lines carry Timesketch's `timestamp` (µs since 1970).
pub const FORMAT_VERSION: u32 = 3;

/// A command's JSON document that is not a listing: `{"format_version", "command", ...}`, the
/// model's own fields after those two.
#[derive(serde::Serialize)]
pub struct Document<'a, T: serde::Serialize> {
    pub format_version: u32,
    pub command: &'a str,
    #[serde(flatten)]
    pub body: &'a T,
}

impl<'a, T: serde::Serialize> Document<'a, T> {
    /// `body` as the JSON document of `command`.
    pub fn new(command: &'a str, body: &'a T) -> Self {
        Document {
            format_version: FORMAT_VERSION,
            command,
            body,
        }
    }
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
    crate::addr::hex_string(v, 1)
}

/// `f` of each item, in the items' order, computed in consecutive shares on up to `threads`
/// threads (on this one for fewer than 64 items); a share whose thread failed is computed
/// here, so that every result is there.
pub(crate) fn in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if threads < 2 || items.len() < 64 {
        return items.iter().map(&f).collect();
    }
    let per = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(per)
            .map(|part| {
                (
                    part,
                    scope.spawn(move || part.iter().map(f).collect::<Vec<_>>()),
                )
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|(part, h)| h.join().unwrap_or_else(|_| part.iter().map(f).collect()))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::in_order;

    #[test]
    fn in_order_is_the_sequential_map_on_any_number_of_threads() {
        for n in [0usize, 1, 63, 64, 65, 127, 1000] {
            let items: Vec<u64> = (0..n as u64).collect();
            let want: Vec<u64> = items.iter().map(|x| x * x + 7).collect();
            for threads in [0, 1, 2, 3, 4, 7] {
                assert_eq!(
                    in_order(&items, threads, |x| x * x + 7),
                    want,
                    "{n} {threads}"
                );
            }
        }
    }
}
