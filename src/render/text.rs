//! Text from memory made safe for a terminal: the escaping lives in [`crate::text`] (its one
//! home); the rendering layer uses it through these names.

pub use crate::text::{html, json_terminal_safe, printable, url_path};
