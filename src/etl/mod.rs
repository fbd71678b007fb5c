//! The .etl format and the trace-buffer framing it shares with memory (etw-internals.md §2,
//! §5, §6): pure bytes, no memory or symbols.
//!
//! - [`header`]: WMI_BUFFER_HEADER, the one home of its offsets and constants;
//! - [`records`]: the record framing inside a buffer (the eight header kinds) and its walk;
//! - [`logfile`]: the TRACE_LOGFILE_HEADER of a file, read back (its clock facts);
//! - [`reader`]: an .etl file split into buffers, each walked;
//! - [`writer`]: the header buffer (TRACE_LOGFILE_HEADER), fixed-up and synthetic buffers, and
//!   a file writer that hashes as it writes and renames into place when complete.

pub mod header;
pub mod logfile;
pub mod reader;
pub mod records;
pub mod rundown;
pub mod writer;
