//! Kernel objects, read through typed views over the memory layer.
//!
//! The layouts used here are the stable, public ones (KDDEBUGGER_DATA64, KUSER_SHARED_DATA,
//! the head of KLDR_DATA_TABLE_ENTRY, the PE format); version-dependent structures come from
//! the symbols layer.

pub mod context;
pub mod discover;
pub mod kdbg;
pub mod kuser;
pub mod modules;
pub mod pe;
pub mod pool;
pub mod processes;
pub(crate) mod userland;
pub mod view;

use crate::addr::VirtAddr;
use crate::dump::Arch;
use crate::mem::{AddressSpace, MemError};
use crate::text::Untrusted;

/// Read a NUL-terminated ASCII string of at most `max` bytes, page by page. `None` when the
/// first byte is unreadable; a string cut by a missing page ends there.
pub(crate) fn read_ascii_z(
    space: &AddressSpace<'_>,
    va: VirtAddr,
    max: usize,
) -> Option<Untrusted> {
    let mut out = Vec::new();
    let mut cur = va;
    while out.len() < max {
        let n = (0x1000 - cur.page_offset() as usize).min(max - out.len());
        let mut buf = vec![0u8; n];
        if space.read(cur, &mut buf).is_err() {
            break;
        }
        if let Some(z) = buf.iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..z]);
            return Some(Untrusted::from_utf8_lossy(&out));
        }
        out.extend_from_slice(&buf);
        cur = cur.offset(n as u64);
    }
    (!out.is_empty()).then(|| Untrusted::from_utf8_lossy(&out))
}

/// A UNICODE_STRING as stored: byte length and buffer address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UnicodeString {
    pub length: u16,
    pub maximum_length: u16,
    pub buffer: VirtAddr,
}

impl UnicodeString {
    /// Read the descriptor at `va`.
    pub fn read(space: &AddressSpace<'_>, va: VirtAddr) -> Result<UnicodeString, MemError> {
        let length = space.read_u16(va)?;
        let maximum_length = space.read_u16(va.offset(2))?;
        let ptr_off = if space.arch().is_64bit() { 8 } else { 4 };
        let buffer = space.read_ptr(va.offset(ptr_off))?;
        Ok(UnicodeString {
            length,
            maximum_length,
            buffer,
        })
    }

    /// The descriptor in `bytes` at `at` (a copy of the structure that holds it, e.g. a page
    /// read by physical address); `None` when `bytes` does not hold it.
    pub fn from_bytes(bytes: &[u8], at: usize, arch: Arch) -> Option<UnicodeString> {
        use crate::bytes::LeBytes;
        let length = bytes.u16_at(at)?;
        let maximum_length = bytes.u16_at(at + 2)?;
        let buffer = if arch.is_64bit() {
            bytes.u64_at(at + 8)?
        } else {
            u64::from(bytes.u32_at(at + 4)?)
        };
        Some(UnicodeString {
            length,
            maximum_length,
            buffer: VirtAddr::new(buffer),
        })
    }

    /// The text (Length is at most 0xFFFF bytes, so the read is bounded).
    pub fn text(&self, space: &AddressSpace<'_>) -> Result<Untrusted, MemError> {
        if self.length == 0 {
            return Ok(Untrusted::default());
        }
        let bytes = space.read_vec(self.buffer, usize::from(self.length & !1))?;
        Ok(Untrusted::from_utf16le_z(&bytes))
    }
}
