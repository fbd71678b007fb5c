//! POOL_HEADER in front of a small pool allocation: 16 bytes on x64, 8 on x86, with the
//! four-byte PoolTag at +4 on both (the layout of every NT version since 5.0). Big-pool
//! allocations (page aligned, a page or more) have no header in front of them.

use crate::addr::VirtAddr;
use crate::dump::Arch;
use crate::mem::AddressSpace;

/// Size of the POOL_HEADER on `arch` (also its alignment).
pub(crate) fn header_size_on(arch: Arch) -> u64 {
    match arch {
        Arch::X86 { .. } => 8,
        Arch::X64 => 0x10,
        Arch::Arm64 => 0x10, // ARM64 takes the x64 size today
    }
}

/// Size of the POOL_HEADER for the address space's architecture.
pub fn header_size(space: &AddressSpace<'_>) -> u64 {
    header_size_on(space.arch())
}

/// The pool tag in front of the allocation at `va`, when its header is readable. `None` for a
/// page-aligned address (a big-pool allocation has no header in front of it, and the bytes
/// before it belong to another page) and for an unreadable header.
pub(crate) fn tag_before(space: &AddressSpace<'_>, va: VirtAddr) -> Option<[u8; 4]> {
    if va.page_offset() == 0 {
        return None;
    }
    let hdr = VirtAddr::new(va.get().checked_sub(header_size(space))?);
    space.read_u32(hdr.offset(4)).ok().map(u32::to_le_bytes)
}

/// The size of the small-pool allocation at `va` by its POOL_HEADER's BlockSize (x64: byte 2,
/// 16-byte units; x86: bits 0-8 of the second USHORT, 8-byte units), header excluded. An upper
/// bound of the size asked for (the pool rounds up). `None` when the header is unreadable or
/// the address is page aligned (big pool).
pub(crate) fn block_bytes(space: &AddressSpace<'_>, va: VirtAddr) -> Option<u64> {
    if va.page_offset() == 0 {
        return None;
    }
    let hdr = VirtAddr::new(va.get().checked_sub(header_size(space))?);
    let w = space.read_u32(hdr).ok()?;
    let (units, unit) = match space.arch() {
        Arch::X86 { .. } => (u64::from((w >> 16) & 0x1FF), 8),
        Arch::X64 => (u64::from((w >> 16) & 0xFF), 16),
        Arch::Arm64 => (u64::from((w >> 16) & 0xFF), 16), // ARM64 takes the x64 header today
    };
    (units * unit)
        .checked_sub(header_size(space))
        .filter(|&b| b > 0)
}
