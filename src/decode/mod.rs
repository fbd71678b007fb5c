//! The decoding layer: what is inside ETW buffers.

pub mod ccswap;
pub mod cswitch;
pub mod dispatch;
pub mod fields;
pub mod hooks;
pub mod manifest;
mod manifest_schemas;
pub mod mof;
pub mod names;
pub mod payload;
pub mod raw;
pub mod tracelogging;
