//! KDDEBUGGER_DATA64, the debugger data block ("KDBG"). Its layout is public (WDBGEXTS.H) and
//! the same on x86 and x64: every pointer field is 64 bits wide, x86 pointers sign-extended.
//! Fields were only ever appended; `Size` says how many a kernel has
//! (crash-dump-format.md §1.4 B). Dumps written by the kernel hold it decoded; an encoded copy
//! has no `KDBG` tag.

use crate::addr::VirtAddr;
use crate::bytes::{tag_text, LeBytes};
use crate::mem::{AddressSpace, MemError};
use crate::symbols::{builtin, StructLayout};
use std::sync::OnceLock;

/// Offset of a field of the public KDDEBUGGER_DATA64 layout (built-in; tested against the
/// real 19041 dump).
fn off(name: &str) -> usize {
    static LAYOUT: OnceLock<StructLayout> = OnceLock::new();
    LAYOUT
        .get_or_init(builtin::kdbg_layout)
        .field(name)
        .map(|f| f.offset as usize)
        .unwrap_or_else(|| panic!("the built-in KDDEBUGGER_DATA64 layout lacks {name}"))
}

/// Largest block read (0x380 on Windows 10 19041; later builds add a few fields).
const MAX_READ: usize = 0x400;
/// Smallest plausible Size (the Windows XP block ends before 0x200).
const MIN_SIZE: u32 = 0x80;

/// Decode an encoded KDBG (whole qwords) with `keys` = (KiWaitNever, KiWaitAlways, the VA of
/// KdpDataBlockEncoded); see [`KdDebuggerData::read_encoded`].
pub(crate) fn decode_block(raw: &[u8], keys: (u64, u64, u64)) -> Vec<u8> {
    let (never, always, flag_va) = keys;
    raw.chunks_exact(8)
        .flat_map(|c| {
            let q = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            let d =
                always ^ (flag_va ^ (never ^ q).rotate_left((never & 0x3F) as u32)).swap_bytes();
            d.to_le_bytes()
        })
        .collect()
}

/// A decoded debugger data block.
#[derive(Clone, Debug)]
pub struct KdDebuggerData {
    pub va: VirtAddr,
    /// The block's Size field.
    pub size: u32,
    bytes: Vec<u8>,
}

/// What was found at the header's KdDebuggerDataBlock.
#[derive(Clone, Debug)]
pub enum KdbgState {
    /// Tag `KDBG` and a plausible size.
    Decoded(KdDebuggerData),
    /// Readable, but no `KDBG` tag: encoded (Windows 8+ with KdpDataBlockEncoded) or not a
    /// debugger data block at all.
    NotDecoded { va: VirtAddr, tag: String },
    /// The header gives no address.
    NoAddress,
    /// The block's first page is not in the dump.
    Unreadable { va: VirtAddr, error: MemError },
}

impl KdDebuggerData {
    /// Read the block at `va`.
    pub fn read(space: &AddressSpace<'_>, va: VirtAddr) -> KdbgState {
        if va.is_null() {
            return KdbgState::NoAddress;
        }
        let mut head = [0u8; 0x18];
        if let Err(error) = space.read(va, &mut head) {
            return KdbgState::Unreadable { va, error };
        }
        let tag = &head[off("OwnerTag")..off("OwnerTag") + 4];
        let size = head.u32_at(off("Size")).unwrap_or(0);
        if tag != b"KDBG" || size < MIN_SIZE {
            return KdbgState::NotDecoded {
                va,
                tag: tag_text(tag),
            };
        }
        // Read as much of the block as is present, up to its declared size.
        let want = (size as usize).min(MAX_READ);
        let mut bytes = vec![0u8; want];
        let mut have = 0usize;
        while have < want {
            let n = (want - have).min(0x1000 - (va.offset(have as u64).page_offset() as usize));
            if space
                .read(va.offset(have as u64), &mut bytes[have..have + n])
                .is_err()
            {
                break;
            }
            have += n;
        }
        bytes.truncate(have);
        KdbgState::Decoded(KdDebuggerData { va, size, bytes })
    }

    /// Read the block at `va` that Windows 8+ keeps encoded while no debugger is attached
    /// (`KdpDataBlockEncoded` nonzero): each qword q is decoded as the kernel's KdCopyDataBlock
    /// does, `KiWaitAlways ^ bswap64(&KdpDataBlockEncoded ^ rol64(KiWaitNever ^ q,
    /// KiWaitNever & 0x3F))`. `keys` = (KiWaitNever, KiWaitAlways, the VA of
    /// KdpDataBlockEncoded). The result is accepted only when it then has the `KDBG` tag and a
    /// plausible Size.
    pub(crate) fn read_encoded(
        space: &AddressSpace<'_>,
        va: VirtAddr,
        keys: (u64, u64, u64),
    ) -> KdbgState {
        let mut raw = vec![0u8; MAX_READ];
        let have = space.read_prefix(va, &mut raw);
        raw.truncate(have - have % 8);
        if raw.len() < 0x18 {
            return KdbgState::Unreadable {
                va,
                error: space
                    .read(va, &mut [0u8; 0x18])
                    .err()
                    .unwrap_or(MemError::NonCanonical { va }),
            };
        }
        let bytes = decode_block(&raw, keys);
        let tag = &bytes[off("OwnerTag")..off("OwnerTag") + 4];
        let size = bytes.u32_at(off("Size")).unwrap_or(0);
        if tag != b"KDBG" || size < MIN_SIZE {
            return KdbgState::NotDecoded {
                va,
                tag: format!(
                    "{} (and not after decoding with KiWaitNever/KiWaitAlways)",
                    tag_text(tag)
                ),
            };
        }
        let mut bytes = bytes;
        bytes.truncate((size as usize).min(bytes.len()));
        KdbgState::Decoded(KdDebuggerData { va, size, bytes })
    }

    /// A 64-bit field, if the block is large enough to have it and it was readable.
    pub(crate) fn u64_field(&self, offset: usize) -> Option<u64> {
        if offset + 8 > self.size as usize {
            return None;
        }
        self.bytes.u64_at(offset)
    }

    /// KernBase: the kernel image's base.
    pub fn kern_base(&self) -> Option<VirtAddr> {
        self.u64_field(off("KernBase")).map(VirtAddr::new)
    }
    /// PsLoadedModuleList: the head of the loaded-module list.
    pub fn ps_loaded_module_list(&self) -> Option<VirtAddr> {
        self.u64_field(off("PsLoadedModuleList")).map(VirtAddr::new)
    }
    /// PsActiveProcessHead: the head of the process list.
    pub fn ps_active_process_head(&self) -> Option<VirtAddr> {
        self.u64_field(off("PsActiveProcessHead"))
            .map(VirtAddr::new)
    }
    /// MmPfnDatabase: the address of the PFN database pointer.
    pub fn mm_pfn_database(&self) -> Option<VirtAddr> {
        self.u64_field(off("MmPfnDatabase")).map(VirtAddr::new)
    }
    /// NtBuildLab: the build-lab string.
    pub fn nt_build_lab(&self) -> Option<VirtAddr> {
        self.u64_field(off("NtBuildLab")).map(VirtAddr::new)
    }
    /// KiProcessorBlock: the array of KPRCB pointers.
    pub fn ki_processor_block(&self) -> Option<VirtAddr> {
        self.u64_field(off("KiProcessorBlock")).map(VirtAddr::new)
    }
    /// `OffsetPrcbMhz`: where the KPRCB keeps the CPU speed in MHz (a 16-bit offset).
    pub(crate) fn offset_prcb_mhz(&self) -> Option<u64> {
        let o = off("OffsetPrcbMhz");
        if o + 2 > self.size as usize {
            return None;
        }
        self.bytes.u16_at(o).map(u64::from).filter(|&v| v != 0)
    }
    /// EtwpDebuggerData: the ETW debugger data (its logger-array route).
    pub fn etwp_debugger_data(&self) -> Option<VirtAddr> {
        self.u64_field(off("EtwpDebuggerData")).map(VirtAddr::new)
    }

    /// The NtBuildLab string (e.g. "19041.1.amd64fre.vb_release.191206-1406"), if readable.
    pub(crate) fn read_build_lab(
        &self,
        space: &AddressSpace<'_>,
    ) -> Option<crate::text::Untrusted> {
        let va = self.nt_build_lab().filter(|v| v.get() != 0)?;
        super::read_ascii_z(space, va, 128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's own encoding (KdEncodeDataBlock, the inverse of KdCopyDataBlock):
    /// `KiWaitNever ^ ror64(&KdpDataBlockEncoded ^ bswap64(KiWaitAlways ^ q), KiWaitNever)`.
    fn encode(q: u64, (never, always, flag): (u64, u64, u64)) -> u64 {
        never ^ (flag ^ (always ^ q).swap_bytes()).rotate_right((never & 0x3F) as u32)
    }

    #[test]
    fn decoding_inverts_the_kernels_encoding() {
        let keys = (
            0x8642_0975_31FE_DCBA,
            0x0F1E_2D3C_4B5A_6978,
            0xFFFF_F803_1234_5678,
        );
        let plain = [0u64, 1, 0x4742_444B, 0xFFFF_F803_1861_DF80, u64::MAX];
        let raw: Vec<u8> = plain
            .iter()
            .flat_map(|&q| encode(q, keys).to_le_bytes())
            .collect();
        assert_ne!(&raw[..8], &0u64.to_le_bytes(), "encoding transforms");
        let back = decode_block(&raw, keys);
        let got: Vec<u64> = back
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, plain);
        // A rotation by 64 or more is taken modulo 64, as the CPU's ROL does.
        let keys = (0xFF, 0, 0);
        assert_eq!(
            decode_block(&encode(0x1234, keys).to_le_bytes(), keys),
            0x1234u64.to_le_bytes()
        );
    }
}
