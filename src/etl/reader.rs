//! Reading an ETL file: WMI_BUFFER_HEADER-framed buffers of BufferSize bytes each, with
//! SavedOffset the valid length (etw-internals.md §6.1).

use super::header::BUFFER_HEADER_SIZE;
use super::records::{walk, Walk};
use crate::bytes::LeBytes;
use serde::Serialize;
use std::collections::BTreeMap;

/// One buffer of an ETL file.
#[derive(Clone, Debug, Serialize)]
pub struct EtlBuffer {
    pub offset: u64,
    pub buffer_size: u32,
    pub saved_offset: u32,
    pub buffer_type: u16,
    pub sequence_number: i64,
    pub records: usize,
    pub records_by_hook: BTreeMap<String, u64>,
    pub trimmed_bytes: usize,
    /// Why the record walk stopped early, if it did.
    pub torn: Option<String>,
    #[serde(skip)]
    pub walk: Walk,
}

/// The buffers of an ETL file and why reading stopped, if it stopped early.
#[derive(Clone, Debug, Serialize)]
pub struct EtlFile {
    pub buffers: Vec<EtlBuffer>,
    pub problem: Option<String>,
}

/// Split `bytes` into buffers and walk each.
pub fn read(bytes: &[u8]) -> EtlFile {
    let mut buffers = Vec::new();
    let mut off = 0usize;
    let mut problem = None;
    while off < bytes.len() {
        let (Some(size), Some(saved)) = (bytes.u32_at(off), bytes.u32_at(off + 4)) else {
            problem = Some(format!(
                "a buffer header at file offset {off:#x} is cut off"
            ));
            break;
        };
        let size_u = size as usize;
        if size_u < BUFFER_HEADER_SIZE || off + size_u > bytes.len() {
            problem = Some(format!(
                "the buffer at file offset {off:#x} has BufferSize {size:#x}, which does not fit the file"
            ));
            break;
        }
        let buf = &bytes[off..off + size_u];
        let valid = (saved as usize).min(size_u);
        let w = walk(buf, valid);
        buffers.push(EtlBuffer {
            offset: off as u64,
            buffer_size: size,
            saved_offset: saved,
            buffer_type: buf.u16_at(0x36).unwrap_or(0),
            sequence_number: buf.i64_at(0x18).unwrap_or(0),
            records: w.count,
            records_by_hook: w.by_key(),
            trimmed_bytes: w.trimmed,
            torn: w
                .torn
                .as_ref()
                .map(|t| format!("at {:#x}: {}", t.offset, t.reason)),
            walk: w,
        });
        off += size_u;
    }
    EtlFile { buffers, problem }
}

/// Why `bytes` is not an ETL file at all (as opposed to a damaged one), if it is not: an ETL
/// starts with a header buffer (etw-internals.md §6.1-§6.2) whose first record, at 0x48, is a
/// SYSTEM_TRACE_HEADER (flags byte 0xC0, header type 1-4) with HookId 0.
pub fn not_an_etl(bytes: &[u8], f: &EtlFile) -> Option<String> {
    if bytes.is_empty() {
        return Some("the file is empty".into());
    }
    let Some(first) = f.buffers.first() else {
        return Some(
            f.problem
                .clone()
                .unwrap_or_else(|| "no buffer could be read".into()),
        );
    };
    let at = BUFFER_HEADER_SIZE;
    let (Some(marker), Some(hook)) = (bytes.u32_at(at), bytes.u16_at(at + 6)) else {
        return Some("the first buffer holds no record".into());
    };
    let ty = (marker >> 16) & 0xFF;
    if marker >> 24 != 0xC0
        || !(1..=4).contains(&ty)
        || hook != 0
        || first.saved_offset < 0x48 + 0x20
    {
        return Some(format!(
            "the first buffer does not start with the logfile header event (marker {marker:#010x}, hook {hook:#06x} at offset 0x48)"
        ));
    }
    None
}

/// Read the buffer at offset `off` of an .etl file of `len` bytes from `file` (positioned at
/// `off`: buffers are read in file order) into `buf` (its BufferSize bytes). `Ok(Err(why))`
/// when the buffer's header does not fit the file (cut off, or a BufferSize smaller than a
/// buffer header or past the end): the walk stops there, and `why` names the offset. At most
/// what is left of the file is ever allocated.
pub fn read_buffer(
    file: &mut dyn std::io::Read,
    off: u64,
    len: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<Result<(), String>> {
    let rest = len.saturating_sub(off);
    if rest < 8 {
        return Ok(Err(format!(
            "a buffer header at file offset {off:#x} is cut off"
        )));
    }
    let mut head = [0u8; 8];
    file.read_exact(&mut head)?;
    let size = u64::from(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
    if size < BUFFER_HEADER_SIZE as u64 || size > rest {
        return Ok(Err(format!(
            "the buffer at file offset {off:#x} has BufferSize {size:#x}, which does not fit the file"
        )));
    }
    buf.clear();
    buf.extend_from_slice(&head);
    buf.resize(size as usize, 0);
    file.read_exact(&mut buf[8..])?;
    Ok(Ok(()))
}
