//! The rendering layer: how models are printed. Commands build models ([`crate::report`]);
//! this layer turns them into text (table, CSV, JSON, JSON Lines) without reading memory.

pub mod buffers;
pub mod check;
pub mod collect;
pub mod csv;
pub mod etl;
pub mod extract;
pub mod info;
pub mod json;
pub mod listings;
pub mod output;
pub mod overview;
pub mod providers;
pub mod read;
pub mod rows;
pub mod sessions;
pub mod svg;
pub mod symbols;
pub mod text;
