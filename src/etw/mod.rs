//! The ETW layer: where the kernel keeps its loggers, and what of it the dump holds.

pub mod buffers;
pub mod carve;
pub mod carved;
pub mod ccswap;
pub mod clock;
pub mod consumers;
pub mod etw_support;
pub mod findings;
pub mod loggers;
pub mod mode;
pub(crate) mod provider_names;
pub mod providers;
pub mod realtime;
pub mod routes;
pub mod silo;
pub mod source;
pub mod tamper;
pub mod triage;
pub mod userpatch;
