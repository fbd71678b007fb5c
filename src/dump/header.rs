//! The crash-dump header: `DUMP_HEADER32` ("PAGEDUMP", 0x1000 bytes) and `DUMP_HEADER64`
//! ("PAGEDU64", 0x2000 bytes). Offsets: reference crash-dump-format.md §1.1 (mindumpdef.h,
//! kdmp-parser, volatility3, rizin; checked on the real triage dumps).

use super::DumpError;
use crate::addr::{PointerWidth, VirtAddr};
use crate::bytes::{tag_text, LeBytes};
use serde::Serialize;

const SIG_PAGE: &[u8; 4] = b"PAGE";
const VALID_32: &[u8; 4] = b"DUMP";
const VALID_64: &[u8; 4] = b"DU64";

pub const MACHINE_I386: u32 = 0x14C;
pub const MACHINE_AMD64: u32 = 0x8664;
pub const MACHINE_ARM64: u32 = 0xAA64;

/// The dumped machine's architecture and paging mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// 32-bit x86; `pae` selects PAE (3-level, 8-byte entries) over classic 2-level paging.
    X86 {
        pae: bool,
    },
    X64,
    Arm64,
}

impl Arch {
    pub fn pointer_size(self) -> u64 {
        match self {
            Arch::X86 { .. } => 4,
            Arch::X64 | Arch::Arm64 => 8,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86 { pae: true } => "x86 (PAE)",
            Arch::X86 { pae: false } => "x86 (non-PAE)",
            Arch::X64 => "x64",
            Arch::Arm64 => "ARM64",
        }
    }
    pub(crate) fn is_64bit(self) -> bool {
        self.pointer_size() == 8
    }
    /// The pointer width (64-bit on x64 and ARM64).
    pub fn width(self) -> PointerWidth {
        match self {
            Arch::X86 { .. } => PointerWidth::Bits32,
            Arch::X64 | Arch::Arm64 => PointerWidth::Bits64,
        }
    }
}

/// The header's DumpType, with its documented name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpType(pub u32);

impl DumpType {
    pub const FULL: DumpType = DumpType(1);
    pub const TRIAGE: DumpType = DumpType(4);
    pub(crate) const BITMAP_FULL: DumpType = DumpType(5);
    pub(crate) const BITMAP_KERNEL: DumpType = DumpType(6);

    /// Name as in mindumpdef.h (1-7) and kdmp-parser (8-0xA); `None` for unknown values.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "full",
            2 => "summary",
            3 => "header only",
            4 => "triage",
            5 => "bitmap full",
            6 => "bitmap kernel",
            7 => "automatic",
            8 => "kernel memory (RDMP)",
            9 => "kernel and user memory (RDMP)",
            0xA => "complete memory (RDMP)",
            _ => return None,
        })
    }
}

/// Field offsets of one header flavour.
struct HeaderLayout {
    size: u64,
    which: &'static str,
    ptr: usize,
    dtb: usize,
    pfn_database: usize,
    ps_loaded_module_list: usize,
    ps_active_process_head: usize,
    machine: usize,
    cpus: usize,
    bugcheck: usize,
    bugcheck_params: usize,
    kd_debugger_data_block: usize,
    physical_memory_block: usize,
    dump_type: usize,
    mini_dump_fields: usize,
    product_type: usize,
    suite_mask: usize,
    attributes: usize,
    required_dump_space: usize,
    system_up_time: usize,
    system_time: usize,
}

const LAYOUT32: HeaderLayout = HeaderLayout {
    size: 0x1000,
    which: "DUMP_HEADER32",
    ptr: 4,
    dtb: 0x10,
    pfn_database: 0x14,
    ps_loaded_module_list: 0x18,
    ps_active_process_head: 0x1C,
    machine: 0x20,
    cpus: 0x24,
    bugcheck: 0x28,
    bugcheck_params: 0x2C,
    kd_debugger_data_block: 0x60,
    physical_memory_block: 0x64,
    dump_type: 0xF88,
    mini_dump_fields: 0xF8C,
    product_type: 0xF94,
    suite_mask: 0xF98,
    attributes: 0x8A0,
    required_dump_space: 0xFA0,
    system_up_time: 0xFB8,
    system_time: 0xFC0,
};

const LAYOUT64: HeaderLayout = HeaderLayout {
    size: 0x2000,
    which: "DUMP_HEADER64",
    ptr: 8,
    dtb: 0x10,
    pfn_database: 0x18,
    ps_loaded_module_list: 0x20,
    ps_active_process_head: 0x28,
    machine: 0x30,
    cpus: 0x34,
    bugcheck: 0x38,
    bugcheck_params: 0x40,
    kd_debugger_data_block: 0x80,
    physical_memory_block: 0x88,
    dump_type: 0xF98,
    mini_dump_fields: 0x1038,
    product_type: 0x1040,
    suite_mask: 0x1044,
    attributes: 0x1050,
    required_dump_space: 0xFA0,
    system_up_time: 0x1030,
    system_time: 0xFA8,
};

/// x86 only: PaeEnabled byte.
const PAE_ENABLED_32: usize = 0x5C;
/// Size of the PhysicalMemoryBlock union in both headers.
pub(crate) const PHYSICAL_MEMORY_BLOCK_SIZE: usize = 700;
/// Unused header words hold the string "PAGE".
pub(crate) const PAGE_FILL: u32 = u32::from_le_bytes(*SIG_PAGE);

/// The parsed dump header.
#[derive(Clone, Debug)]
pub struct DumpHeader {
    pub arch: Arch,
    /// Header size in bytes (0x1000 or 0x2000): the data after it starts here.
    pub header_size: u64,
    pub major_version: u32,
    /// The NT build number.
    pub minor_version: u32,
    /// CR3 as stored, including any low (PCID) bits.
    pub directory_table_base: u64,
    pub pfn_database: VirtAddr,
    pub ps_loaded_module_list: VirtAddr,
    pub ps_active_process_head: VirtAddr,
    pub machine_image_type: u32,
    pub number_processors: u32,
    pub bugcheck_code: u32,
    pub bugcheck_params: [u64; 4],
    pub kd_debugger_data_block: VirtAddr,
    pub dump_type: DumpType,
    pub mini_dump_fields: u32,
    pub product_type: u32,
    pub suite_mask: u32,
    /// DUMP_FILE_ATTRIBUTES; `None` when the field holds the "PAGE" fill.
    pub attributes: Option<u32>,
    pub required_dump_space: u64,
    /// 100 ns units since boot.
    pub system_up_time: u64,
    /// FILETIME (100 ns units since 1601-01-01 UTC).
    pub system_time: u64,
    /// File offset of the PhysicalMemoryBlock union.
    pub physical_memory_block_offset: usize,
}

impl DumpHeader {
    /// The header of a memory image, which has none: nothing is known (DumpType 0, no DTB,
    /// no lists, no times, no CPU count; `arch` is only the container's hint, e.g. an ELF
    /// core's e_machine). Discovery finds the machine (`kernel::discover::machine`, a
    /// [`crate::mem::Machine`]); the kernel layer finds the rest.
    pub fn none(arch: Arch) -> DumpHeader {
        DumpHeader {
            arch,
            header_size: 0,
            major_version: 0,
            minor_version: 0,
            directory_table_base: 0,
            pfn_database: VirtAddr::new(0),
            ps_loaded_module_list: VirtAddr::new(0),
            ps_active_process_head: VirtAddr::new(0),
            machine_image_type: 0,
            number_processors: 0,
            bugcheck_code: 0,
            bugcheck_params: [0; 4],
            kd_debugger_data_block: VirtAddr::new(0),
            dump_type: DumpType(0),
            mini_dump_fields: 0,
            product_type: 0,
            suite_mask: 0,
            attributes: None,
            required_dump_space: 0,
            system_up_time: 0,
            system_time: 0,
            physical_memory_block_offset: 0,
        }
    }

    /// Parse the header at the start of `file`. Checks signatures, length and architecture.
    pub fn parse(file: &[u8]) -> Result<DumpHeader, DumpError> {
        let len = file.len() as u64;
        if len == 0 {
            return Err(DumpError::Empty);
        }
        if len < 8 {
            return Err(DumpError::TooShort { len });
        }
        let sig = &file[0..4];
        if sig == b"MDMP" {
            return Err(DumpError::UserModeMinidump);
        }
        if sig != SIG_PAGE {
            return Err(DumpError::BadSignature {
                found: tag_text(sig),
            });
        }
        let valid = &file[4..8];
        let l = if valid == VALID_64 {
            &LAYOUT64
        } else if valid == VALID_32 {
            &LAYOUT32
        } else {
            return Err(DumpError::BadValidDump {
                found: tag_text(valid),
            });
        };
        if len < l.size {
            return Err(DumpError::TruncatedHeader {
                which: l.which,
                need: l.size,
                have: len,
            });
        }
        let h = &file[..l.size as usize];
        // Every offset below is inside the header, whose length was checked above.
        let u32_ = |o: usize| h.u32_at(o).unwrap_or(0);
        let u64_ = |o: usize| h.u64_at(o).unwrap_or(0);
        let ptr = |o: usize| {
            if l.ptr == 8 {
                u64_(o)
            } else {
                u64::from(u32_(o))
            }
        };
        let machine = u32_(l.machine);
        let arch = match (l.ptr, machine) {
            (8, MACHINE_AMD64) => Arch::X64,
            (8, MACHINE_ARM64) => Arch::Arm64,
            (4, MACHINE_I386) => Arch::X86 {
                pae: h[PAE_ENABLED_32] != 0,
            },
            _ => {
                return Err(DumpError::UnsupportedArch {
                    machine,
                    which: l.which,
                })
            }
        };
        let mut bugcheck_params = [0u64; 4];
        for (i, p) in bugcheck_params.iter_mut().enumerate() {
            *p = ptr(l.bugcheck_params + i * l.ptr);
        }
        let attributes = Some(u32_(l.attributes)).filter(|&a| a != PAGE_FILL);
        Ok(DumpHeader {
            arch,
            header_size: l.size,
            major_version: u32_(8),
            minor_version: u32_(0xC),
            directory_table_base: ptr(l.dtb),
            pfn_database: VirtAddr::new(ptr(l.pfn_database)),
            ps_loaded_module_list: VirtAddr::new(ptr(l.ps_loaded_module_list)),
            ps_active_process_head: VirtAddr::new(ptr(l.ps_active_process_head)),
            machine_image_type: machine,
            number_processors: u32_(l.cpus),
            bugcheck_code: u32_(l.bugcheck),
            bugcheck_params,
            kd_debugger_data_block: VirtAddr::new(ptr(l.kd_debugger_data_block)),
            dump_type: DumpType(u32_(l.dump_type)),
            mini_dump_fields: u32_(l.mini_dump_fields),
            product_type: u32_(l.product_type),
            suite_mask: u32_(l.suite_mask),
            attributes,
            required_dump_space: u64_(l.required_dump_space),
            system_up_time: u64_(l.system_up_time),
            system_time: u64_(l.system_time),
            physical_memory_block_offset: l.physical_memory_block,
        })
    }

    /// File offset of the DumpType field (for error messages).
    pub(crate) fn dump_type_offset(&self) -> u64 {
        if self.arch.is_64bit() {
            LAYOUT64.dump_type as u64
        } else {
            LAYOUT32.dump_type as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header64() -> Vec<u8> {
        let mut h = b"PAGE".repeat(0x800);
        h[4..8].copy_from_slice(b"DU64");
        h[0x30..0x34].copy_from_slice(&MACHINE_AMD64.to_le_bytes());
        h
    }

    #[test]
    fn parses_x64_fields() {
        let mut h = header64();
        h[0x10..0x18].copy_from_slice(&0x1AD002u64.to_le_bytes());
        h[0x38..0x3C].copy_from_slice(&0x1000007Eu32.to_le_bytes());
        h[0x58..0x60].copy_from_slice(&0xFFFF850429891720u64.to_le_bytes());
        h[0xF98..0xF9C].copy_from_slice(&4u32.to_le_bytes());
        h[0xFA8..0xFB0].copy_from_slice(&132583451029877657u64.to_le_bytes());
        let p = DumpHeader::parse(&h).unwrap();
        assert_eq!(p.arch, Arch::X64);
        assert_eq!(p.directory_table_base, 0x1AD002);
        assert_eq!(p.bugcheck_code, 0x1000007E);
        assert_eq!(p.bugcheck_params[3], 0xFFFF850429891720);
        assert_eq!(p.dump_type, DumpType::TRIAGE);
        assert_eq!(p.system_time, 132583451029877657);
        assert_eq!(p.attributes, None);
    }

    #[test]
    fn rejects_bad_inputs() {
        assert!(matches!(DumpHeader::parse(&[]), Err(DumpError::Empty)));
        assert!(matches!(
            DumpHeader::parse(b"PAGE"),
            Err(DumpError::TooShort { len: 4 })
        ));
        assert!(matches!(
            DumpHeader::parse(b"MDMP\x93\xa7\0\0"),
            Err(DumpError::UserModeMinidump)
        ));
        let e = DumpHeader::parse(b"\x7fELF\x02\x01\x01\0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "not a Windows kernel crash dump: signature at offset 0 is \"\\x7fELF\" (expected \"PAGE\")"
        );
        let h = header64();
        let e = DumpHeader::parse(&h[..0x1000]).unwrap_err();
        assert!(matches!(
            e,
            DumpError::TruncatedHeader {
                need: 0x2000,
                have: 0x1000,
                ..
            }
        ));
        let mut h = header64();
        h[0x30..0x34].copy_from_slice(&0x1C4u32.to_le_bytes());
        assert!(matches!(
            DumpHeader::parse(&h),
            Err(DumpError::UnsupportedArch { machine: 0x1C4, .. })
        ));
    }
}
