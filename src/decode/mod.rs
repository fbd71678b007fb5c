//! The decoding layer: what is inside ETW buffers.

pub mod ccswap;
pub mod cswitch;
pub mod etl;
pub mod fields;
pub mod hooks;
pub mod names;
pub mod records;
