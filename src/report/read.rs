//! `etwdump read`: bytes at a virtual or physical address.

use crate::addr::{PhysAddr, VirtAddr};
use crate::mem::{AddressSpace, MemError};
use serde::Serialize;

/// Largest read the command accepts.
pub(crate) const MAX_LEN: usize = 16 << 20;

/// `read`: the bytes at a virtual or physical address (as hex).
#[derive(Debug, Serialize)]
pub struct ReadReport {
    pub address: String,
    pub physical: bool,
    pub length: usize,
    pub hex: String,
}

/// Read `len` bytes at `addr` (virtual unless `physical`).
pub fn read(
    space: &AddressSpace<'_>,
    addr: u64,
    len: usize,
    physical: bool,
) -> Result<(ReadReport, Vec<u8>), MemError> {
    if len > MAX_LEN {
        return Err(MemError::TooLarge {
            what: "read",
            va: VirtAddr::new(addr),
            reason: format!(
                "{len:#x} bytes is more than the {MAX_LEN:#x}-byte limit of this command"
            ),
        });
    }
    let mut buf = vec![0u8; len];
    if physical {
        space.read_phys(PhysAddr::new(addr), &mut buf)?;
    } else {
        space.read(VirtAddr::new(addr), &mut buf)?;
    }
    let hex = buf.iter().map(|b| format!("{b:02x}")).collect();
    Ok((
        ReadReport {
            address: format!("{addr:#x}"),
            physical,
            length: len,
            hex,
        },
        buf,
    ))
}
