//! The decoding layer: what is inside ETW buffers.

pub mod etl;
pub mod records;
