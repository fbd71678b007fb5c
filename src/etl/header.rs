//! WMI_BUFFER_HEADER, the 0x48-byte header of every trace buffer in memory and in an .etl
//! file: its offsets for code that reads raw bytes (ETL files, triage-dump windows, the ETW
//! secondary data) or writes them (`etl::writer`). Reads from mapped memory go through the
//! symbols' `_WMI_BUFFER_HEADER` layout (PDB, ISF or the built-in table). The offsets' one
//! home is that built-in table (`symbols::builtin::buffer_header`): the constants here are
//! its newest era's, taken from it at compile time; every 6.0+ kernel has them, on x86 and
//! x64 alike (etw-internals.md §2; `tests/builtin_layouts.rs` checks the table against the
//! public layouts).

use crate::bytes::LeBytes;
use serde::Serialize;

/// Size of WMI_BUFFER_HEADER: records start after it.
pub const BUFFER_HEADER_SIZE: usize = crate::symbols::builtin::buffer_header::SIZE as usize;

/// Offsets of the members the tool reads and writes (6.0+, x86 and x64 alike; §2.1), from the
/// built-in table's newest era.
pub mod offsets {
    use crate::symbols::builtin::buffer_header::newest_offset;

    /// BufferSize (u32): the buffer's size in bytes.
    pub(crate) const BUFFER_SIZE: usize = newest_offset("BufferSize");
    /// SavedOffset (u32): the valid end of a buffer written to a file.
    pub const SAVED_OFFSET: usize = newest_offset("SavedOffset");
    /// CurrentOffset (u32): the valid end of a buffer being filled.
    pub(crate) const CURRENT_OFFSET: usize = newest_offset("CurrentOffset");
    /// TimeStamp (i64): when the buffer was flushed or last used, in the session's clock.
    pub(crate) const TIME_STAMP: usize = newest_offset("TimeStamp");
    /// SequenceNumber (i64): the buffer's position in its session's sequence.
    pub const SEQUENCE_NUMBER: usize = newest_offset("SequenceNumber");
    /// ETW_BUFFER_CONTEXT {ProcessorIndex: 11 bits (or ProcessorNumber u8 + Alignment u8);
    /// LoggerId: u16 at +2}.
    pub const CLIENT_CONTEXT: usize = newest_offset("ClientContext");
    /// State (ETW_BUFFER_STATE: free, general logging, CSwitch, flush, ...).
    pub(crate) const STATE: usize = newest_offset("State");
    /// Offset (u32): the next free byte while the buffer is filled.
    pub(crate) const OFFSET: usize = newest_offset("Offset");
    /// BufferFlag (u16).
    pub(crate) const BUFFER_FLAG: usize = newest_offset("BufferFlag");
    /// BufferType (u16): generic, rundown, CTX_SWAP, header, ...
    pub(crate) const BUFFER_TYPE: usize = newest_offset("BufferType");
}

/// ETW_BUFFER_STATE Flush: what a buffer written to a file says (§2.4).
pub const STATE_FLUSH: u32 = 3;
/// BufferFlag FLUSH_MARKER | ... : the processor index in ClientContext is valid (0x20).
pub(crate) const FLAG_PROCESSOR_INDEX: u16 = 0x20;
/// BufferType HEADER (the first buffer of a file) and CTX_SWAP (§2.5).
pub(crate) const BUFFER_TYPE_HEADER: u16 = 4;
/// BufferType CTX_SWAP: a buffer of compact context switches.
pub const BUFFER_TYPE_CTX_SWAP: u16 = 2;

/// The fields of a WMI_BUFFER_HEADER the tool uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BufferHeader {
    pub buffer_size: u64,
    pub saved_offset: u64,
    pub current_offset: u64,
    pub offset: u64,
    pub sequence_number: u64,
    pub processor_index: u64,
    pub logger_id: u64,
    pub state: u64,
    pub buffer_flag: u64,
    pub buffer_type: u64,
}

/// BufferFlag COMPRESSED and State Compressed (1607+).
const FLAG_COMPRESSED: u64 = 0x40;
const STATE_COMPRESSED: u64 = 5;

impl BufferHeader {
    /// A WMI_BUFFER_HEADER from raw bytes, at the [`offsets`] every 6.0+ kernel uses on x86 and
    /// x64 (etw-internals.md §2; ClientContext: ProcessorIndex in its low 11 bits, LoggerId in
    /// its high u16). For buffers that are not in mapped memory (triage-dump windows and the
    /// ETW secondary data).
    pub fn from_bytes(b: &[u8]) -> Option<BufferHeader> {
        use offsets::*;
        let u32_ = |o: usize| b.u32_at(o).map(u64::from);
        let cc = b.u32_at(CLIENT_CONTEXT)?;
        Some(BufferHeader {
            buffer_size: u32_(BUFFER_SIZE)?,
            saved_offset: u32_(SAVED_OFFSET)?,
            current_offset: u32_(CURRENT_OFFSET)?,
            offset: u32_(OFFSET)?,
            sequence_number: b.u64_at(SEQUENCE_NUMBER)?,
            processor_index: u64::from(cc & 0x07FF),
            logger_id: u64::from(cc >> 16),
            state: u32_(STATE)?,
            buffer_flag: u64::from(b.u16_at(BUFFER_FLAG)?),
            buffer_type: u64::from(b.u16_at(BUFFER_TYPE)?),
        })
    }

    /// The kernel's own rule (§2.6): CurrentOffset when it is within the buffer, else
    /// SavedOffset (the true end once CurrentOffset overflowed). `None` when neither is
    /// plausible.
    pub fn valid_bytes(&self) -> Option<u64> {
        let v = if self.current_offset <= self.buffer_size {
            self.current_offset
        } else {
            self.saved_offset
        };
        (BUFFER_HEADER_SIZE as u64..=self.buffer_size)
            .contains(&v)
            .then_some(v)
    }

    /// The buffer is compressed (its flag or its state says so): its records cannot be walked.
    pub fn compressed(&self) -> bool {
        self.buffer_flag & FLAG_COMPRESSED != 0 || self.state == STATE_COMPRESSED
    }
}

/// ETW_BUFFER_STATE names (§2.4).
pub(crate) fn state_name(s: u64) -> &'static str {
    match s {
        0 => "Free",
        1 => "GeneralLogging",
        2 => "CSwitch",
        3 => "Flush",
        4 => "PendingCompression",
        5 => "Compressed",
        6 => "Placeholder",
        _ => "unknown",
    }
}
