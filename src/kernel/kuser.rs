//! KUSER_SHARED_DATA: the page the kernel shares with user mode at a fixed address.
//! Offsets checked against the real 19041 ISF (NtBuildNumber 0x260, NtMajorVersion 0x26C,
//! NtMinorVersion 0x270, SystemTime 0x14, QpcFrequency 0x300).

use crate::addr::VirtAddr;
use crate::bytes::LeBytes;
use crate::dump::Arch;
use crate::mem::{AddressSpace, MemError};

/// KUSER_SHARED_DATA on x64 (and ARM64).
pub(crate) const KUSER_X64: VirtAddr = VirtAddr::new(0xFFFF_F780_0000_0000);
/// KUSER_SHARED_DATA on x86.
pub(crate) const KUSER_X86: VirtAddr = VirtAddr::new(0xFFDF_0000);

mod field {
    /// KSYSTEM_TIME InterruptTime: 100 ns since boot.
    pub(crate) const INTERRUPT_TIME: usize = 0x08;
    pub const SYSTEM_TIME: usize = 0x14;
    pub(crate) const NT_BUILD_NUMBER: usize = 0x260;
    pub(crate) const NT_PRODUCT_TYPE: usize = 0x264;
    pub(crate) const PRODUCT_TYPE_IS_VALID: usize = 0x268;
    pub(crate) const NT_MAJOR_VERSION: usize = 0x26C;
    pub(crate) const NT_MINOR_VERSION: usize = 0x270;
    pub(crate) const END: usize = 0x274;
    /// 6.3+ (checked against the real 9600-22000 layouts).
    pub(crate) const QPC_FREQUENCY: u64 = 0x300;
}

/// The fields `info` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KUserSharedData {
    pub va: VirtAddr,
    /// As stored (free builds set the top nibble, e.g. 0xF0004A61).
    pub nt_build_number_raw: u32,
    pub nt_product_type: Option<u32>,
    pub nt_major_version: u32,
    pub nt_minor_version: u32,
    /// FILETIME; `None` when the KSYSTEM_TIME was caught mid-update (High1Time != High2Time).
    pub system_time: Option<u64>,
    /// InterruptTime: 100 ns units since boot; `None` when caught mid-update.
    pub interrupt_time: Option<u64>,
}

impl KUserSharedData {
    /// Where KUSER_SHARED_DATA is mapped on `arch`.
    pub fn address(arch: Arch) -> VirtAddr {
        if arch.is_64bit() {
            KUSER_X64
        } else {
            KUSER_X86
        }
    }

    /// Read the fields the tool uses (build number and version, product type, system and
    /// interrupt time).
    pub fn read(space: &AddressSpace<'_>) -> Result<KUserSharedData, MemError> {
        let va = Self::address(space.arch());
        let mut b = vec![0u8; field::END];
        space.read(va, &mut b)?;
        let u = |o: usize| b.u32_at(o).unwrap_or(0);
        // KSYSTEM_TIME {LowPart, High1Time, High2Time}: consistent when High1 == High2.
        let ksystem_time = |o: usize| {
            let (low, high1, high2) = (u(o), u(o + 4), u(o + 8));
            (high1 == high2).then(|| (u64::from(high1) << 32) | u64::from(low))
        };
        Ok(KUserSharedData {
            va,
            nt_build_number_raw: u(field::NT_BUILD_NUMBER),
            nt_product_type: (b[field::PRODUCT_TYPE_IS_VALID] != 0)
                .then(|| u(field::NT_PRODUCT_TYPE)),
            nt_major_version: u(field::NT_MAJOR_VERSION),
            nt_minor_version: u(field::NT_MINOR_VERSION),
            system_time: ksystem_time(field::SYSTEM_TIME),
            interrupt_time: ksystem_time(field::INTERRUPT_TIME),
        })
    }

    /// KUSER_SHARED_DATA.QpcFrequency at `offset` (the `_KUSER_SHARED_DATA` layout's, or
    /// `Self::qpc_frequency_offset`); `None` when the page is not in the dump or the value
    /// is 0.
    pub fn qpc_frequency(space: &AddressSpace<'_>, offset: u64) -> Option<u64> {
        let va = Self::address(space.arch()).offset(offset);
        space.read_u64(va).ok().filter(|&f| f > 0)
    }

    /// Where QpcFrequency is when no layout says: 0x300 from 6.3 (9600) on — measured in the
    /// real 9600 to 22000 layouts; 7601 has no such field.
    pub(crate) fn qpc_frequency_offset(build: u32) -> Option<u64> {
        (build >= 9600).then_some(field::QPC_FREQUENCY)
    }

    /// Does the page at `va` in `space` look like KUSER_SHARED_DATA (NtMajorVersion 5, 6 or
    /// 10, NtMinorVersion at most 3)? Discovery's test of a page-table candidate.
    pub(crate) fn plausible_at(space: &AddressSpace<'_>) -> Option<(u32, u32)> {
        let va = Self::address(space.arch());
        let major = space
            .read_u32(va.offset(field::NT_MAJOR_VERSION as u64))
            .ok()?;
        let minor = space
            .read_u32(va.offset(field::NT_MINOR_VERSION as u64))
            .ok()?;
        (matches!(major, 5 | 6 | 10) && minor <= 3).then_some((major, minor))
    }

    /// The build number without the free/checked flag nibble.
    pub fn build_number(&self) -> u32 {
        self.nt_build_number_raw & 0x0FFF_FFFF
    }
}
