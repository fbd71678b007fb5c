//! `_KDDEBUGGER_DATA64` (the "KDBG" block): a public, fixed layout, the same on x86 and x64
//! (every address member is a ULONG64).
//!
//! Source: WDBGEXTS.H of the Windows SDK, as in `marlersoft/microsoft_windows_sdk_cpp`
//! `um/WDBGEXTS.H` (struct ending with the "Windows 10 Iron Addition"
//! OffsetEProcessMmHotPatchContext), cross-checked with `tpn/winsdk-10`
//! `Include/10.0.14393.0/um/WDBGEXTS.H` (ending with PteBase, its padding named `Padding`
//! there) and `0vercl0k/kdmp-parser-rs` `src/structs.rs` (`KdDebuggerData64`, to
//! OffsetPrcbContext). Offsets follow the C layout of that definition; crash-dump-format.md
//! §1.4 B confirms OwnerTag 0x10, Size 0x14, KernBase 0x18, PsLoadedModuleList 0x48,
//! PsActiveProcessHead 0x50, MmPfnDatabase 0xC0, NtBuildLab 0x208, KiProcessorBlock 0x218,
//! EtwpDebuggerData 0x330 and OffsetPrcbContext 0x338, and a Size of 0x380 on 19041 (= this
//! definition's size). Members added after Iron (shadow-stack and pointer-authentication
//! members, found only in third-party copies) are left out.
//!
//! The block grew over time; `Header.Size` tells how much of it a kernel has (0x340 in old
//! layouts). Which members are present is for the reader to decide from that Size.
//!
//! `Header` (DBGKD_DEBUG_DATA_HEADER64) is a named member; its three members are also listed,
//! flattened (List, OwnerTag, Size), so that they can be read by name.

use super::Ty::{self, *};
use crate::symbols::layout::{LayoutSource, StructLayout};

const NAME: &str = "_KDDEBUGGER_DATA64";
const SIZE: u64 = 0x380;

pub(super) fn layout() -> StructLayout {
    FIELDS.iter().fold(
        StructLayout::new(NAME, SIZE, LayoutSource::Builtin),
        |l, &(name, ty, offset)| l.with(name, offset, ty.type_ref()),
    )
}

/// In declaration order.
const FIELDS: &[(&str, Ty, u64)] = &[
    ("Header", Struct("_DBGKD_DEBUG_DATA_HEADER64"), 0x0),
    ("List", Struct("_LIST_ENTRY64"), 0x0),
    ("OwnerTag", U32, 0x10),
    ("Size", U32, 0x14),
    ("KernBase", U64, 0x18),
    ("BreakpointWithStatus", U64, 0x20),
    ("SavedContext", U64, 0x28),
    ("ThCallbackStack", U16, 0x30),
    ("NextCallback", U16, 0x32),
    ("FramePointer", U16, 0x34),
    ("PaeEnabled", Bits16(0, 1), 0x36),
    ("KiBugCheckRecoveryActive", Bits16(1, 1), 0x36),
    ("PagingLevels", Bits16(2, 4), 0x36),
    ("KiCallUserMode", U64, 0x38),
    ("KeUserCallbackDispatcher", U64, 0x40),
    ("PsLoadedModuleList", U64, 0x48),
    ("PsActiveProcessHead", U64, 0x50),
    ("PspCidTable", U64, 0x58),
    ("ExpSystemResourcesList", U64, 0x60),
    ("ExpPagedPoolDescriptor", U64, 0x68),
    ("ExpNumberOfPagedPools", U64, 0x70),
    ("KeTimeIncrement", U64, 0x78),
    ("KeBugCheckCallbackListHead", U64, 0x80),
    ("KiBugcheckData", U64, 0x88),
    ("IopErrorLogListHead", U64, 0x90),
    ("ObpRootDirectoryObject", U64, 0x98),
    ("ObpTypeObjectType", U64, 0xa0),
    ("MmSystemCacheStart", U64, 0xa8),
    ("MmSystemCacheEnd", U64, 0xb0),
    ("MmSystemCacheWs", U64, 0xb8),
    ("MmPfnDatabase", U64, 0xc0),
    ("MmSystemPtesStart", U64, 0xc8),
    ("MmSystemPtesEnd", U64, 0xd0),
    ("MmSubsectionBase", U64, 0xd8),
    ("MmNumberOfPagingFiles", U64, 0xe0),
    ("MmLowestPhysicalPage", U64, 0xe8),
    ("MmHighestPhysicalPage", U64, 0xf0),
    ("MmNumberOfPhysicalPages", U64, 0xf8),
    ("MmMaximumNonPagedPoolInBytes", U64, 0x100),
    ("MmNonPagedSystemStart", U64, 0x108),
    ("MmNonPagedPoolStart", U64, 0x110),
    ("MmNonPagedPoolEnd", U64, 0x118),
    ("MmPagedPoolStart", U64, 0x120),
    ("MmPagedPoolEnd", U64, 0x128),
    ("MmPagedPoolInformation", U64, 0x130),
    ("MmPageSize", U64, 0x138),
    ("MmSizeOfPagedPoolInBytes", U64, 0x140),
    ("MmTotalCommitLimit", U64, 0x148),
    ("MmTotalCommittedPages", U64, 0x150),
    ("MmSharedCommit", U64, 0x158),
    ("MmDriverCommit", U64, 0x160),
    ("MmProcessCommit", U64, 0x168),
    ("MmPagedPoolCommit", U64, 0x170),
    ("MmExtendedCommit", U64, 0x178),
    ("MmZeroedPageListHead", U64, 0x180),
    ("MmFreePageListHead", U64, 0x188),
    ("MmStandbyPageListHead", U64, 0x190),
    ("MmModifiedPageListHead", U64, 0x198),
    ("MmModifiedNoWritePageListHead", U64, 0x1a0),
    ("MmAvailablePages", U64, 0x1a8),
    ("MmResidentAvailablePages", U64, 0x1b0),
    ("PoolTrackTable", U64, 0x1b8),
    ("NonPagedPoolDescriptor", U64, 0x1c0),
    ("MmHighestUserAddress", U64, 0x1c8),
    ("MmSystemRangeStart", U64, 0x1d0),
    ("MmUserProbeAddress", U64, 0x1d8),
    ("KdPrintCircularBuffer", U64, 0x1e0),
    ("KdPrintCircularBufferEnd", U64, 0x1e8),
    ("KdPrintWritePointer", U64, 0x1f0),
    ("KdPrintRolloverCount", U64, 0x1f8),
    ("MmLoadedUserImageList", U64, 0x200),
    ("NtBuildLab", U64, 0x208),
    ("KiNormalSystemCall", U64, 0x210),
    ("KiProcessorBlock", U64, 0x218),
    ("MmUnloadedDrivers", U64, 0x220),
    ("MmLastUnloadedDriver", U64, 0x228),
    ("MmTriageActionTaken", U64, 0x230),
    ("MmSpecialPoolTag", U64, 0x238),
    ("KernelVerifier", U64, 0x240),
    ("MmVerifierData", U64, 0x248),
    ("MmAllocatedNonPagedPool", U64, 0x250),
    ("MmPeakCommitment", U64, 0x258),
    ("MmTotalCommitLimitMaximum", U64, 0x260),
    ("CmNtCSDVersion", U64, 0x268),
    ("MmPhysicalMemoryBlock", U64, 0x270),
    ("MmSessionBase", U64, 0x278),
    ("MmSessionSize", U64, 0x280),
    ("MmSystemParentTablePage", U64, 0x288),
    ("MmVirtualTranslationBase", U64, 0x290),
    ("OffsetKThreadNextProcessor", U16, 0x298),
    ("OffsetKThreadTeb", U16, 0x29a),
    ("OffsetKThreadKernelStack", U16, 0x29c),
    ("OffsetKThreadInitialStack", U16, 0x29e),
    ("OffsetKThreadApcProcess", U16, 0x2a0),
    ("OffsetKThreadState", U16, 0x2a2),
    ("OffsetKThreadBStore", U16, 0x2a4),
    ("OffsetKThreadBStoreLimit", U16, 0x2a6),
    ("SizeEProcess", U16, 0x2a8),
    ("OffsetEprocessPeb", U16, 0x2aa),
    ("OffsetEprocessParentCID", U16, 0x2ac),
    ("OffsetEprocessDirectoryTableBase", U16, 0x2ae),
    ("SizePrcb", U16, 0x2b0),
    ("OffsetPrcbDpcRoutine", U16, 0x2b2),
    ("OffsetPrcbCurrentThread", U16, 0x2b4),
    ("OffsetPrcbMhz", U16, 0x2b6),
    ("OffsetPrcbCpuType", U16, 0x2b8),
    ("OffsetPrcbVendorString", U16, 0x2ba),
    ("OffsetPrcbProcStateContext", U16, 0x2bc),
    ("OffsetPrcbNumber", U16, 0x2be),
    ("SizeEThread", U16, 0x2c0),
    ("L1tfHighPhysicalBitIndex", U8, 0x2c2),
    ("L1tfSwizzleBitIndex", U8, 0x2c3),
    ("Padding0", U32, 0x2c4),
    ("KdPrintCircularBufferPtr", U64, 0x2c8),
    ("KdPrintBufferSize", U64, 0x2d0),
    ("KeLoaderBlock", U64, 0x2d8),
    ("SizePcr", U16, 0x2e0),
    ("OffsetPcrSelfPcr", U16, 0x2e2),
    ("OffsetPcrCurrentPrcb", U16, 0x2e4),
    ("OffsetPcrContainedPrcb", U16, 0x2e6),
    ("OffsetPcrInitialBStore", U16, 0x2e8),
    ("OffsetPcrBStoreLimit", U16, 0x2ea),
    ("OffsetPcrInitialStack", U16, 0x2ec),
    ("OffsetPcrStackLimit", U16, 0x2ee),
    ("OffsetPrcbPcrPage", U16, 0x2f0),
    ("OffsetPrcbProcStateSpecialReg", U16, 0x2f2),
    ("GdtR0Code", U16, 0x2f4),
    ("GdtR0Data", U16, 0x2f6),
    ("GdtR0Pcr", U16, 0x2f8),
    ("GdtR3Code", U16, 0x2fa),
    ("GdtR3Data", U16, 0x2fc),
    ("GdtR3Teb", U16, 0x2fe),
    ("GdtLdt", U16, 0x300),
    ("GdtTss", U16, 0x302),
    ("Gdt64R3CmCode", U16, 0x304),
    ("Gdt64R3CmTeb", U16, 0x306),
    ("IopNumTriageDumpDataBlocks", U64, 0x308),
    ("IopTriageDumpDataBlocks", U64, 0x310),
    ("VfCrashDataBlock", U64, 0x318),
    ("MmBadPagesDetected", U64, 0x320),
    ("MmZeroedPageSingleBitErrorsDetected", U64, 0x328),
    ("EtwpDebuggerData", U64, 0x330),
    ("OffsetPrcbContext", U16, 0x338),
    ("OffsetPrcbMaxBreakpoints", U16, 0x33a),
    ("OffsetPrcbMaxWatchpoints", U16, 0x33c),
    ("OffsetKThreadStackLimit", U32, 0x340),
    ("OffsetKThreadStackBase", U32, 0x344),
    ("OffsetKThreadQueueListEntry", U32, 0x348),
    ("OffsetEThreadIrpList", U32, 0x34c),
    ("OffsetPrcbIdleThread", U16, 0x350),
    ("OffsetPrcbNormalDpcState", U16, 0x352),
    ("OffsetPrcbDpcStack", U16, 0x354),
    ("OffsetPrcbIsrStack", U16, 0x356),
    ("SizeKDPC_STACK_FRAME", U16, 0x358),
    ("OffsetKPriQueueThreadListHead", U16, 0x35a),
    ("OffsetKThreadWaitReason", U16, 0x35c),
    ("Padding1", U16, 0x35e),
    ("PteBase", U64, 0x360),
    ("RetpolineStubFunctionTable", U64, 0x368),
    ("RetpolineStubFunctionTableSize", U32, 0x370),
    ("RetpolineStubOffset", U32, 0x374),
    ("RetpolineStubSize", U32, 0x378),
    ("OffsetEProcessMmHotPatchContext", U16, 0x37c),
];

#[cfg(test)]
mod tests {
    use super::super::layouts;
    use super::super::tests::off;
    use super::super::TableFamily::{X64, X86};
    use super::*;

    #[test]
    fn known_offsets_on_every_era_and_arch() {
        for &b in super::super::tests::BUILDS {
            for family in [X86, X64] {
                let Some(l) = layouts(b, family) else {
                    continue;
                };
                for (f, o) in [
                    ("OwnerTag", 0x10),
                    ("Size", 0x14),
                    ("KernBase", 0x18),
                    ("PsLoadedModuleList", 0x48),
                    ("PsActiveProcessHead", 0x50),
                    ("MmPfnDatabase", 0xC0),
                    ("NtBuildLab", 0x208),
                    ("KiProcessorBlock", 0x218),
                    ("EtwpDebuggerData", 0x330),
                    ("OffsetPrcbContext", 0x338),
                ] {
                    assert_eq!(off(&l, NAME, f), Some(o), "{b} {family:?} {f}");
                }
            }
        }
    }

    /// The offsets follow C layout (natural alignment) of the members in order, and the
    /// structure ends at 0x380.
    #[test]
    fn offsets_follow_the_c_layout() {
        let mut next: u64 = 0x18; // after Header
        let mut last_bits = None;
        for &(name, ty, offset) in &FIELDS[4..] {
            let size = match ty {
                U8 => 1,
                U16 | Bits16(..) => 2,
                U32 => 4,
                U64 => 8,
                other => panic!("{name}: {other:?}"),
            };
            if let Bits16(..) = ty {
                // consecutive USHORT bit fields share one unit
                if last_bits == Some(offset) {
                    continue;
                }
                last_bits = Some(offset);
            }
            next = next.div_ceil(size) * size;
            assert_eq!(offset, next, "{name}");
            next += size;
        }
        assert_eq!(next.div_ceil(8) * 8, SIZE);
    }
}
