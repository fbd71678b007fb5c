//! KDDEBUGGER_DATA64, the debugger data block ("KDBG"). Its layout is public (WDBGEXTS.H) and
//! the same on x86 and x64: every pointer field is 64 bits wide, x86 pointers sign-extended.
//! Fields were only ever appended; `Size` says how many a kernel has
//! (crash-dump-format.md §1.4 B). Dumps written by the kernel hold it decoded; an encoded copy
//! has no `KDBG` tag.

use crate::addr::VirtAddr;
use crate::bytes::{tag_text, LeBytes};
use crate::mem::{AddressSpace, MemError};

/// Offsets of the fields the tool uses.
pub mod field {
    pub const OWNER_TAG: usize = 0x10;
    pub const SIZE: usize = 0x14;
    pub const KERN_BASE: usize = 0x18;
    pub const PS_LOADED_MODULE_LIST: usize = 0x48;
    pub const PS_ACTIVE_PROCESS_HEAD: usize = 0x50;
    pub const MM_PFN_DATABASE: usize = 0xC0;
    pub const NT_BUILD_LAB: usize = 0x208;
    pub const KI_PROCESSOR_BLOCK: usize = 0x218;
    pub const ETWP_DEBUGGER_DATA: usize = 0x330;
}

/// Largest block read (0x380 on Windows 10 19041; later builds add a few fields).
const MAX_READ: usize = 0x400;
/// Smallest plausible Size (the Windows XP block ends before 0x200).
const MIN_SIZE: u32 = 0x80;

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
        if va.0 == 0 {
            return KdbgState::NoAddress;
        }
        let mut head = [0u8; 0x18];
        if let Err(error) = space.read(va, &mut head) {
            return KdbgState::Unreadable { va, error };
        }
        let tag = &head[field::OWNER_TAG..field::OWNER_TAG + 4];
        let size = head.u32_at(field::SIZE).unwrap_or(0);
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

    /// A 64-bit field, if the block is large enough to have it and it was readable.
    pub fn u64_field(&self, offset: usize) -> Option<u64> {
        if offset + 8 > self.size as usize {
            return None;
        }
        self.bytes.u64_at(offset)
    }

    pub fn kern_base(&self) -> Option<VirtAddr> {
        self.u64_field(field::KERN_BASE).map(VirtAddr)
    }
    pub fn ps_loaded_module_list(&self) -> Option<VirtAddr> {
        self.u64_field(field::PS_LOADED_MODULE_LIST).map(VirtAddr)
    }
    pub fn ps_active_process_head(&self) -> Option<VirtAddr> {
        self.u64_field(field::PS_ACTIVE_PROCESS_HEAD).map(VirtAddr)
    }
    pub fn mm_pfn_database(&self) -> Option<VirtAddr> {
        self.u64_field(field::MM_PFN_DATABASE).map(VirtAddr)
    }
    pub fn nt_build_lab(&self) -> Option<VirtAddr> {
        self.u64_field(field::NT_BUILD_LAB).map(VirtAddr)
    }
    pub fn ki_processor_block(&self) -> Option<VirtAddr> {
        self.u64_field(field::KI_PROCESSOR_BLOCK).map(VirtAddr)
    }
    pub fn etwp_debugger_data(&self) -> Option<VirtAddr> {
        self.u64_field(field::ETWP_DEBUGGER_DATA).map(VirtAddr)
    }

    /// The NtBuildLab string (e.g. "19041.1.amd64fre.vb_release.191206-1406"), if readable.
    pub fn read_build_lab(&self, space: &AddressSpace<'_>) -> Option<String> {
        let va = self.nt_build_lab().filter(|v| v.0 != 0)?;
        super::read_ascii_z(space, va, 128)
    }
}
