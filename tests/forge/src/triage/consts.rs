//! Facts copied from the reference documents and the real triage dump D1
//! (`shared/data/dumps/triage_x64.dmp`, build 19041.804) and its kernel ISF
//! `5278AFF86C341677D7D7835C85B7B844-1`. The forge never reads `shared/` at run time.

/// The PDB of D1's kernel (crash-dump-format.md §2.2).
pub(crate) const REAL_19041_GUID: &str = "5278AFF8-6C34-1677-D7D7-835C85B7B844";

/// `nt!EtwSecondaryDumpDataGuid`, the tag of the ETW blob (triage-etw.md §1.3).
pub(crate) const ETW_BLOB_GUID: &str = "2B88B710-1C93-4F7C-B06C-655ECC50DECC";

/// Signature of a session part inside the ETW blob (triage-etw.md §1.3).
pub(crate) const SESSION_SIGNATURE: u32 = 0x01EB_AFE1;

/// Window limits of KiSaveCurrentEtwTraceBuffer (triage-etw.md §1.2 (K1)).
pub(crate) const ETW_WINDOW_LIMIT: u32 = 0x2000;
pub(crate) const ERRLOG_WINDOW_LIMIT: u32 = 0x1000;

/// `_WMI_BUFFER_HEADER` size (etw-internals.md §2, crash-dump-format.md §2.3).
pub(crate) const WMI_BUFFER_HEADER_SIZE: u32 =
    crate::etw::wmi_buffer::WMI_BUFFER_HEADER_SIZE as u32;

/// `_KPRCB` of the 19041 ISF: size and field offsets (ISF `_KPRCB`).
pub(crate) const KPRCB_SIZE: usize = 0xAF00;
pub(crate) const KPRCB_MXCSR: usize = 0x0;
pub(crate) const KPRCB_CURRENT_THREAD: usize = 0x8;
pub(crate) const KPRCB_IDLE_THREAD: usize = 0x18;
pub(crate) const KPRCB_NUMBER: usize = 0x24;
pub(crate) const KPRCB_MHZ: usize = 0x44;
pub(crate) const KPRCB_START_CYCLES: usize = 0x7EC0;
pub(crate) const KPRCB_ETW_SUPPORT: usize = 0x8328;

/// `_EPROCESS` / `_ETHREAD` sizes in the 19041 ISF (the triage header's process and thread
/// copies in D1 are exactly that long: 0xD0B8..0xDAF8..0xE390).
pub(crate) const EPROCESS_SIZE: usize = 0xA40;
pub(crate) const ETHREAD_SIZE: usize = 0x898;

/// Size of the decoded KDDEBUGGER_DATA64 copy (D1: DebuggerDataSize 0x380).
pub(crate) const KDBG_SIZE: usize = 0x380;

/// Triage driver-list entry: `{u32 NameOffset; u32 pad; KLDR_DATA_TABLE_ENTRY64 copy}`, 0x90
/// bytes; DllBase at +0x38, SizeOfImage at +0x48 (triage-etw.md §1.1), CheckSum at +0x80 and
/// TimeDateStamp at +0x88 (measured on D1; crash-dump-format.md §1.3 "TimeDateStamp at +0x80"
/// of the copy).
pub(crate) const DRIVER_ENTRY_SIZE: usize = 0x90;

/// Kernel symbols (name, RVA) of the real 19041 ISF. Every symbol of the forged ISF is one of
/// these, so the forged ISF is a faithful subset of the real one.
pub(crate) const KERNEL_SYMBOLS: &[(&str, u64)] = &[
    ("KiCurrentEtwBufferBase", 0xC31450),
    ("KiCurrentEtwBufferOffset", 0xC31458),
    ("KiCurrentErrLogBufferBase", 0xC31440),
    ("KiCurrentErrLogBufferOffset", 0xC31448),
    ("ErrorLogSessionOpened", 0xC456EC),
    ("IopErrorLogSession", 0xCEC880),
    ("KdDebuggerDataBlock", 0xC00B20),
    ("PsLoadedModuleList", 0xC2A390),
    ("PsActiveProcessHead", 0xC1E200),
    ("KiProcessorBlock", 0xCFDC80),
    ("MmPfnDatabase", 0xCFC500),
    ("NtBuildLabEx", 0xC4C0A0),
    ("EtwpDebuggerData", 0xC10D58),
    ("KdpDebuggerDataListHead", 0xC40770),
    ("DbgBreakPointWithStatus", 0x3FD920),
    ("KiCallUserMode", 0x3F9070),
    ("PspCidTable", 0xCFC5C8),
    ("ExpSystemResourcesList", 0xC16890),
    ("KeTimeIncrement", 0xCFC468),
    ("KeBugCheckCallbackListHead", 0xC32050),
    ("KiBugCheckData", 0xC31480),
    ("IopErrorLogListHead", 0xC45C30),
    ("ObpRootDirectoryObject", 0xC251F0),
    ("ObpTypeObjectType", 0xC251E8),
    ("MmSizeOfPagedPoolInBytes", 0xCFC7E8),
    ("PoolTrackTable", 0xC168A8),
    ("MmHighestUserAddress", 0x21440),
    ("MmSystemRangeStart", 0x21448),
    ("MmUserProbeAddress", 0x21438),
    ("KdPrintDefaultCircularBuffer", 0xC32100),
    ("KdPrintBufferChanges", 0xC33100),
    ("KdPrintWritePointer", 0xC04E68),
    ("KdPrintRolloverCount", 0xC320F8),
    ("MmUnloadedDrivers", 0xC2A308),
    ("MmLastUnloadedDriver", 0xC2A310),
    ("VerifierTriageActionTaken", 0xC1CA90),
    ("MmSpecialPoolTag", 0xCFC558),
    ("KernelVerifier", 0xC1CA94),
    ("MmVerifierData", 0xC2A7A0),
    ("CmNtCSDVersion", 0xC4C078),
    ("MmPhysicalMemoryBlock", 0xCFC4A8),
    ("KdPrintCircularBuffer", 0xC04E60),
    ("KdPrintBufferSize", 0xC11F8C),
    ("KdpLoaderDebuggerBlock", 0xC40798),
    ("IopNumTriageDumpDataBlocks", 0xC45FA8),
    ("IopTriageDumpDataBlocks", 0xC45FC0),
    ("RtlRetpolineStubsFunctionTable", 0xE01A70),
    ("PpmCheckPeriodicStart", 0x278F40),
    ("AnFwpProgressIndicatorTimer", 0x9F14C0),
    ("PopPepIdleTimeoutDpcRoutine", 0x56EC40),
    ("PopFxResidentTimeoutDpcRoutine", 0x358970),
    ("KiSaveCurrentEtwTraceBuffer", 0x512B90),
    ("EtwGetProcessorBuffer", 0x5A4648),
    ("EtwpBugCheckMultiPartCallback", 0x5A49C0),
    ("EtwpBugCheckCallback", 0xC19880),
    ("EtwSecondaryDumpDataGuid", 0x3A700),
    ("KeMaximumIncrement", 0xCFC418),
    ("NtBuildNumber", 0xC11EE0),
    ("EtwCPUSpeedInMHz", 0xC19960),
    ("EtwpBootTime", 0xC19B18),
    ("EtwPerfFreq", 0xC19968),
    ("KeNumberProcessors", 0xCFC404),
    ("KeBugCheck2", 0x510D20),
    ("KdVersionBlock", 0xC0F330),
    ("EtwpHostSiloState", 0xCFB008),
    ("CKCLGuid", 0xAAA0),
    ("GUID_TRIAGEDUMP_DATA", 0x34118),
    ("KiTimerExpiration", 0x3859F0),
    ("IopErrorLogDpc", 0x504200),
];

/// RVA of a symbol of [`KERNEL_SYMBOLS`] (panics on an unknown name: a forge bug).
pub(crate) fn rva(name: &str) -> u64 {
    KERNEL_SYMBOLS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| *r)
        .unwrap_or_else(|| panic!("no RVA for {name}"))
}

/// A KDDEBUGGER_DATA64 field value.
pub(crate) enum KdbgVal {
    /// KernBase + the RVA of this symbol.
    Sym(&'static str),
    /// KernBase + this RVA (a pointer with no public symbol in the ISF).
    Rva(u64),
    /// KernBase itself.
    KernBase,
    /// A constant.
    Const(u64),
}

/// The non-zero u64 slots of D1's decoded KDBG (file 0x104A8, 0x380 bytes), with the pointers
/// expressed as symbols of the ISF (measured: every pointer equals KernBase + the RVA of the
/// named ISF symbol). Offsets per crash-dump-format.md §1.4 B: +0x10 OwnerTag `KDBG` and Size
/// 0x380, +0x18 KernBase, +0x48 PsLoadedModuleList, +0x50 PsActiveProcessHead, +0xC0
/// MmPfnDatabase, +0x208 NtBuildLab, +0x218 KiProcessorBlock, +0x330 EtwpDebuggerData.
pub(crate) const KDBG_SLOTS: &[(usize, KdbgVal)] = &[
    (0x00, KdbgVal::Sym("KdpDebuggerDataListHead")),
    (0x08, KdbgVal::Sym("KdpDebuggerDataListHead")),
    (0x10, KdbgVal::Const(0x0000_0380_4742_444B)),
    (0x18, KdbgVal::KernBase),
    (0x20, KdbgVal::Sym("DbgBreakPointWithStatus")),
    (0x30, KdbgVal::Const(0x0001_0000_0000_0000)),
    (0x38, KdbgVal::Sym("KiCallUserMode")),
    (0x48, KdbgVal::Sym("PsLoadedModuleList")),
    (0x50, KdbgVal::Sym("PsActiveProcessHead")),
    (0x58, KdbgVal::Sym("PspCidTable")),
    (0x60, KdbgVal::Sym("ExpSystemResourcesList")),
    (0x78, KdbgVal::Sym("KeTimeIncrement")),
    (0x80, KdbgVal::Sym("KeBugCheckCallbackListHead")),
    (0x88, KdbgVal::Sym("KiBugCheckData")),
    (0x90, KdbgVal::Sym("IopErrorLogListHead")),
    (0x98, KdbgVal::Sym("ObpRootDirectoryObject")),
    (0xA0, KdbgVal::Sym("ObpTypeObjectType")),
    (0xC0, KdbgVal::Sym("MmPfnDatabase")),
    (0x138, KdbgVal::Const(0x1000)),
    (0x140, KdbgVal::Sym("MmSizeOfPagedPoolInBytes")),
    (0x170, KdbgVal::Rva(0xC4EDA8)),
    (0x1B8, KdbgVal::Sym("PoolTrackTable")),
    (0x1C8, KdbgVal::Sym("MmHighestUserAddress")),
    (0x1D0, KdbgVal::Sym("MmSystemRangeStart")),
    (0x1D8, KdbgVal::Sym("MmUserProbeAddress")),
    (0x1E0, KdbgVal::Sym("KdPrintDefaultCircularBuffer")),
    (0x1E8, KdbgVal::Sym("KdPrintBufferChanges")),
    (0x1F0, KdbgVal::Sym("KdPrintWritePointer")),
    (0x1F8, KdbgVal::Sym("KdPrintRolloverCount")),
    (0x208, KdbgVal::Sym("NtBuildLabEx")),
    (0x218, KdbgVal::Sym("KiProcessorBlock")),
    (0x220, KdbgVal::Sym("MmUnloadedDrivers")),
    (0x228, KdbgVal::Sym("MmLastUnloadedDriver")),
    (0x230, KdbgVal::Sym("VerifierTriageActionTaken")),
    (0x238, KdbgVal::Sym("MmSpecialPoolTag")),
    (0x240, KdbgVal::Sym("KernelVerifier")),
    (0x248, KdbgVal::Sym("MmVerifierData")),
    (0x268, KdbgVal::Sym("CmNtCSDVersion")),
    (0x270, KdbgVal::Sym("MmPhysicalMemoryBlock")),
    (0x298, KdbgVal::Const(0x0028_0058_00F0_0218)),
    (0x2A0, KdbgVal::Const(0x0184_00B8)),
    (0x2A8, KdbgVal::Const(0x0028_0540_0550_0A40)),
    (0x2B0, KdbgVal::Const(0x0044_0008_312A_AF00)),
    (0x2B8, KdbgVal::Const(0x0024_01F0_8590_0040)),
    (0x2C0, KdbgVal::Const(0x898)),
    (0x2C8, KdbgVal::Sym("KdPrintCircularBuffer")),
    (0x2D0, KdbgVal::Sym("KdPrintBufferSize")),
    (0x2D8, KdbgVal::Sym("KdpLoaderDebuggerBlock")),
    (0x2E0, KdbgVal::Const(0x0180_0020_0018_B080)),
    (0x2F0, KdbgVal::Const(0x0018_0010_0100_0000)),
    (0x2F8, KdbgVal::Const(0x2B_0033_0000)),
    (0x300, KdbgVal::Const(0x0053_0023_0040_0000)),
    (0x308, KdbgVal::Sym("IopNumTriageDumpDataBlocks")),
    (0x310, KdbgVal::Sym("IopTriageDumpDataBlocks")),
    (0x330, KdbgVal::Sym("EtwpDebuggerData")),
    (0x338, KdbgVal::Const(0x85C0)),
    (0x340, KdbgVal::Const(0x38_0000_0030)),
    (0x348, KdbgVal::Const(0x04B0_0000_0208)),
    (0x350, KdbgVal::Const(0x85D8_3110_312C_0018)),
    (0x358, KdbgVal::Const(0x0283_02A0_0050)),
    (0x360, KdbgVal::Const(0xFFFF_FD80_0000_0000)),
    (0x368, KdbgVal::Sym("RtlRetpolineStubsFunctionTable")),
    (0x370, KdbgVal::Const(0x120)),
    (0x378, KdbgVal::Const(0x1000)),
];

/// A loaded module of D1's triage driver list (measured: full name, DllBase, SizeOfImage,
/// CheckSum, TimeDateStamp). The forge lists a subset, ntoskrnl.exe first.
pub(crate) struct DriverFact {
    pub full_name: &'static str,
    pub base: u64,
    pub size: u32,
    pub checksum: u32,
    pub timestamp: u32,
}

pub(crate) const DRIVERS: &[DriverFact] = &[
    DriverFact {
        full_name: r"\SystemRoot\system32\ntoskrnl.exe",
        base: 0xFFFF_F804_7BA0_0000,
        size: 0x104_6000,
        checksum: 0xA5_938C,
        timestamp: 0x0D83_33E6,
    },
    DriverFact {
        full_name: r"\SystemRoot\system32\hal.dll",
        base: 0xFFFF_F804_7944_0000,
        size: 0x6000,
        checksum: 0xCE9F,
        timestamp: 0x1A7B_E8E9,
    },
    DriverFact {
        full_name: r"\SystemRoot\system32\kd.dll",
        base: 0xFFFF_F804_7945_0000,
        size: 0xB000,
        checksum: 0x4EF6,
        timestamp: 0xFE18_5FA8,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\drivers\CLFS.SYS",
        base: 0xFFFF_F804_7949_0000,
        size: 0x6A000,
        checksum: 0x7_2C51,
        timestamp: 0x5032_08A5,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\drivers\tm.sys",
        base: 0xFFFF_F804_7946_0000,
        size: 0x27000,
        checksum: 0x2_9C42,
        timestamp: 0x4ECE_D593,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\drivers\FLTMGR.SYS",
        base: 0xFFFF_F804_7965_0000,
        size: 0x6F000,
        checksum: 0x7_2E12,
        timestamp: 0x0283_9B66,
    },
    DriverFact {
        full_name: r"\SystemRoot\system32\drivers\Wdf01000.sys",
        base: 0xFFFF_F804_7995_0000,
        size: 0xD1000,
        checksum: 0xD_3980,
        timestamp: 0xA9A9_D36E,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\drivers\ACPI.sys",
        base: 0xFFFF_F804_79C5_0000,
        size: 0xCC000,
        checksum: 0xD_341C,
        timestamp: 0x2D5A_8B5D,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\drivers\pci.sys",
        base: 0xFFFF_F804_79E3_0000,
        size: 0x76000,
        checksum: 0x7_3A9C,
        timestamp: 0x63FF_E199,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\drivers\storahci.sys",
        base: 0xFFFF_F804_7A10_0000,
        size: 0x32000,
        checksum: 0x2_E91D,
        timestamp: 0x8528_F23B,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\drivers\storport.sys",
        base: 0xFFFF_F804_7A14_0000,
        size: 0xB3000,
        checksum: 0xB_8B03,
        timestamp: 0x8E6C_5590,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\Drivers\Ntfs.sys",
        base: 0xFFFF_F804_7A32_0000,
        size: 0x2D_9000,
        checksum: 0x2C_225D,
        timestamp: 0xB106_8108,
    },
    DriverFact {
        full_name: r"\SystemRoot\system32\DRIVERS\VBoxNetLwf.sys",
        base: 0xFFFF_F804_8814_0000,
        size: 0x56000,
        checksum: 0x4_9389,
        timestamp: 0x5F08_D788,
    },
    DriverFact {
        full_name: r"\SystemRoot\System32\drivers\amdppm.sys",
        base: 0xFFFF_F804_8B58_0000,
        size: 0x3B000,
        checksum: 0x3_8E6B,
        timestamp: 0xC9C0_3000,
    },
];

/// Where an interrupt or DPC routine of a logger-2 record points (triage-etw.md §2.1).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Routine {
    /// module base name + offset.
    Module(&'static str, u64),
    /// A kernel function of the ISF.
    Kernel(&'static str),
}

/// 0x0F32 MSI ISR: storport.sys+0xDF70, vector 0x60, ReturnValue 1 (triage-etw.md §2.1).
pub(crate) const MSI_ROUTINE: Routine = Routine::Module("storport.sys", 0xDF70);
pub(crate) const MSI_VECTOR: u16 = 0x60;
/// 0x0F43 ISR: Wdf01000.sys+0x3C30, vector 0x52.
pub(crate) const ISR_ROUTINE: Routine = Routine::Module("Wdf01000.sys", 0x3C30);
pub(crate) const ISR_VECTOR: u16 = 0x52;
/// 0x0F44 DPC routines.
pub(crate) const DPC_ROUTINES: &[Routine] = &[
    Routine::Kernel("PpmCheckPeriodicStart"),
    Routine::Module("storahci.sys", 0x3EC0),
    Routine::Module("Wdf01000.sys", 0x3850),
    Routine::Module("ACPI.sys", 0x598E0),
];
/// 0x0F45 timer-DPC routines.
pub(crate) const TIMER_DPC_ROUTINES: &[Routine] = &[
    Routine::Kernel("AnFwpProgressIndicatorTimer"),
    Routine::Kernel("PopPepIdleTimeoutDpcRoutine"),
    Routine::Kernel("PopFxResidentTimeoutDpcRoutine"),
];

/// PERFINFO hook ids (triage-etw.md §0, (H1)).
pub(crate) const HOOK_MSI_INTERRUPT: u16 = 0x0F32;
pub(crate) const HOOK_INTERRUPT: u16 = 0x0F43;
pub(crate) const HOOK_DPC: u16 = 0x0F44;
pub(crate) const HOOK_TIMER_DPC: u16 = 0x0F45;
/// PERFINFO64 version 2 marker as seen on every D1 logger-2 record.
pub(crate) const PERFINFO64_MARKER: u32 =
    crate::etw::wmi_buffer::perfinfo_marker(true, 2, 0, false);

/// One EVENT_HEADER record template: provider and descriptor as seen in D1's EventLog-System
/// buffer (triage-etw.md §2.3; values measured).
pub(crate) struct EventTemplate {
    pub provider: &'static str,
    pub id: u16,
    pub version: u8,
    pub channel: u8,
    pub level: u8,
    pub opcode: u8,
    pub task: u16,
    pub keyword: u64,
    /// Which extended items: 0 none, 1 SID, 2 SID + provider traits.
    pub ext: u8,
    /// EventProperty (4 = legacy event-log entry).
    pub property: u16,
    pub tid: u32,
    pub pid: u32,
    /// User payload length (odd lengths exercise ALIGN8).
    pub payload: u16,
}

#[allow(clippy::too_many_arguments)] // a table row builder
const fn tpl(
    provider: &'static str,
    id: u16,
    version: u8,
    channel: u8,
    level: u8,
    task: u16,
    keyword: u64,
    ext: u8,
    tid: u32,
    payload: u16,
) -> EventTemplate {
    EventTemplate {
        provider,
        id,
        version,
        channel,
        level,
        opcode: 0,
        task,
        keyword,
        ext,
        property: 0,
        tid,
        pid: 4,
        payload,
    }
}

pub(crate) const KERNEL_GENERAL: &str = "a68ca8b7-004f-d7b6-a698-07e2de0f1f5d";
pub(crate) const LEGACY_ERRLOG: &str = "2d9f3a42-01d4-4733-97f7-041e8021dc84";

/// The rotation of templates used after the first record (Kernel-General 12).
pub(crate) const EVENT_TEMPLATES: &[EventTemplate] = &[
    tpl(
        "67fe2216-727a-40cb-94b2-c02211edb34a",
        100,
        0,
        17,
        4,
        0,
        0x4000_0000_0000_0000,
        1,
        264,
        0x22,
    ),
    tpl(
        "c4636a1e-7986-4646-bf10-7bc3b4a76e8e",
        513,
        1,
        20,
        4,
        201,
        0x0800_2000_0000_0000,
        1,
        8,
        0x4C,
    ),
    tpl(
        "15ca44ff-4d7a-4baa-bba5-0998955e531e",
        18,
        0,
        8,
        4,
        57,
        0x8000_0000_0000_0000,
        2,
        8,
        0x0C,
    ),
    tpl(
        "0bf2fb94-7b60-4b4d-9766-e82f658df540",
        4,
        1,
        17,
        4,
        0,
        0x4000_0000_0000_0000,
        1,
        264,
        0x34,
    ),
    tpl(
        "67fe2216-727a-40cb-94b2-c02211edb34a",
        101,
        0,
        17,
        4,
        0,
        0x4000_0000_0000_0000,
        1,
        196,
        0x22,
    ),
    tpl(
        "f3c5e28e-63f6-49c7-a204-e48a1bc4b09d",
        6,
        0,
        8,
        4,
        0,
        0x8000_0000_0000_0000,
        2,
        8,
        0x1F3,
    ),
    EventTemplate {
        provider: LEGACY_ERRLOG,
        id: 0,
        version: 0,
        channel: 0,
        level: 4,
        opcode: 0,
        task: 0,
        keyword: 0,
        ext: 0,
        property: 4,
        tid: 196,
        pid: 4,
        payload: 0x72,
    },
    tpl(
        "3ff37a1c-a68d-4d6e-8c9b-f79e8b16c482",
        98,
        0,
        8,
        4,
        0,
        0x8000_0000_0000_0002,
        1,
        332,
        0x3A,
    ),
    tpl(
        "52fc89f8-995e-434c-a91e-199986449890",
        2,
        0,
        8,
        4,
        0,
        0x8000_4000_0000_0000,
        2,
        8,
        0x04,
    ),
    EventTemplate {
        provider: "c4636a1e-7986-4646-bf10-7bc3b4a76e8e",
        id: 549,
        version: 2,
        channel: 20,
        level: 2,
        opcode: 0,
        task: 201,
        keyword: 0x0800_0000_0060_0000,
        ext: 0,
        property: 0,
        tid: 0,
        pid: 0,
        payload: 0x7D,
    },
    tpl(
        "7b563579-53c8-44e7-8236-0f87b9fe6594",
        42,
        0,
        17,
        4,
        0,
        0x2000_0000_0000_0400,
        1,
        8,
        0x4E,
    ),
    tpl(
        "331c3b3a-2005-44c2-ac5e-77220c37d6b4",
        172,
        0,
        8,
        4,
        203,
        0x8000_0000_0000_0404,
        1,
        576,
        0x08,
    ),
    tpl(
        "0bf2fb94-7b60-4b4d-9766-e82f658df540",
        4,
        1,
        17,
        4,
        0,
        0x4000_0000_0000_0000,
        1,
        312,
        0x46,
    ),
    tpl(
        "595f7f52-c90a-4026-a125-8eb5e083f15e",
        207,
        0,
        16,
        4,
        0,
        0x8000_0000_0000_0000,
        1,
        304,
        0x5E,
    ),
];

/// D1's long Kernel-WHEA event 5 (Size 5476 = 0x50 + one SID item + 0x14F4 payload).
pub(crate) const WHEA_LONG: EventTemplate = tpl(
    "7b563579-53c8-44e7-8236-0f87b9fe6594",
    5,
    0,
    17,
    4,
    0,
    0x2000_0000_0000_0000,
    1,
    8,
    0x14F4,
);

/// Provider traits payload of D1's extended items of type 12: u16 size 0x16, empty provider
/// name, one trait {u16 0x13, u8 type 1 (group), GUID {4f50731a-89cf-4782-b3e0-dce8c90476ba}}
/// (triage-etw.md §2.3; bytes measured).
pub(crate) const PROVIDER_TRAITS: [u8; 22] = [
    0x16, 0x00, 0x00, 0x13, 0x00, 0x01, 0x1A, 0x73, 0x50, 0x4F, 0xCF, 0x89, 0x82, 0x47, 0xB3, 0xE0,
    0xDC, 0xE8, 0xC9, 0x04, 0x76, 0xBA,
];

/// SID S-1-5-18 as in D1's extended items of type 2.
pub(crate) const SID_LOCAL_SYSTEM: [u8; 12] = [
    0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x12, 0x00, 0x00, 0x00,
];

/// Extended-data item types (triage-etw.md §2.3).
pub(crate) const EXT_SID: u16 = 2;
pub(crate) const EXT_PROV_TRAITS: u16 = 12;

/// Per-architecture facts of the triage dump's fixed parts.
pub(crate) struct ArchFacts {
    pub machine: u32,
    /// DUMP_HEADER64.DirectoryTableBase.
    pub dtb: u64,
    pub kprcb_size: usize,
    pub eprocess_size: usize,
    pub ethread_size: usize,
    pub call_stack_size: usize,
    /// TRIAGE_DUMP.TopOfStack (ARM64: also the CONTEXT's Sp and Fp).
    pub top_of_stack: u64,
    /// ISF `metadata.windows.pdb.machine_type` (IMAGE_FILE_MACHINE_*).
    pub isf_machine_type: u32,
}

/// x64: D1 (crash-dump-format.md §2.1; the 19041 ISF's sizes).
pub(crate) const X64_FACTS: ArchFacts = ArchFacts {
    machine: 0x8664,
    dtb: 0x1AD000,
    kprcb_size: KPRCB_SIZE,
    eprocess_size: EPROCESS_SIZE,
    ethread_size: ETHREAD_SIZE,
    call_stack_size: 0x200,
    top_of_stack: 0xFFFF_8504_2989_0EE8,
    isf_machine_type: 0x8664,
};

/// ARM64: measured on `triage_arm64.dmp` (22000): header +0x10 DirectoryTableBase 0x946AA000,
/// +0x30 MachineImageType 0xAA64; triage header PrcbOffset 0x2340 / ProcessOffset 0xB9C0 /
/// ThreadOffset 0xC640 / CallStackOffset 0xCF50 (so KPRCB 0x9680 = data block #5's size,
/// EPROCESS 0xC80, ETHREAD 0x910 = block #2's size), SizeOfCallStack 0xB60, TopOfStack
/// 0xFFFFE00E0E4BC4A0 (= the CONTEXT's Sp).
pub(crate) const ARM64_FACTS: ArchFacts = ArchFacts {
    machine: 0xAA64,
    dtb: 0x946A_A000,
    kprcb_size: 0x9680,
    eprocess_size: 0xC80,
    ethread_size: 0x910,
    call_stack_size: 0xB60,
    top_of_stack: 0xFFFF_E00E_0E4B_C4A0,
    isf_machine_type: 0xAA64,
};

/// KiCurrentEtwBufferBase RVA of the ARM64 22000 kernel (measured: block #26 VA
/// 0xFFFFF803F3A36AD0 - KernBase 0xFFFFF803F2E00000; KernBase from KDBG+0x18 at file 0xDAC8).
pub(crate) const ARM64_ETW_BASE_RVA: u64 = 0xC3_6AD0;

/// The ARM64 CONTEXT of `triage_arm64.dmp` at file 0x348 (measured; layout: public
/// `ARM64_NT_CONTEXT` in winnt.h: ContextFlags +0, Cpsr +4, X0..X28 +8, Fp +0xF0, Lr +0xF8,
/// Sp +0x100, Pc +0x108, V[32] +0x110, Fpcr +0x310, Fpsr +0x314, Bcr[8] +0x318, Bvr[8] +0x338,
/// Wcr[2] +0x378, Wvr[2] +0x380; 0x390 bytes).
pub(crate) const ARM64_CONTEXT_FLAGS: u32 = 0x0040_0007; // CONTEXT_ARM64 | CONTROL | INTEGER | FLOATING_POINT
pub(crate) const ARM64_CPSR: u32 = 0x8000_0144;
pub(crate) const ARM64_FPSR: u32 = 0x10;
pub(crate) const ARM64_CONTEXT_SIZE: usize = 0x390;
/// Pc - KernBase (0xFFFFF803F32DE014 - 0xFFFFF803F2E00000); also the exception address.
pub(crate) const ARM64_PC_RVA: u64 = 0x4D_E014;
/// X0..X28 as measured; entries marked `None` are KernBase-relative in the real dump and are
/// written as KernBase + the RVA here (so they follow the spec's kernel base).
pub(crate) const ARM64_X: [(u64, bool); 29] = [
    (0x0, false),
    (0x1, false),
    (0xFFFF_FFFF_FFFF_FF80, false),
    (0xC3_6AA0, true),
    (0x0, false),
    (0x0, false),
    (0xC1_6000, true),
    (0x64D, false),
    (0x0, false),
    (0xC2_D000, true),
    (0x8000, false),
    (0xFFFF_E00E_0E4B_D000, false),
    (0xFFFF_E00E_0E4B_5000, false),
    (0x17, false),
    (0x12_4925, false),
    (0xFFF, false),
    (0x8000_0001, false),
    (0x6402_A279_369A, false),
    (0xFFFF_F803_EFD0_0000, false), // X18: the KPCR
    (0xFFFF_F803_EFD0_0980, false), // X19: the KPRCB (data block #5)
    (0x1, false),
    (0x1, false),
    (0x0, false),
    (0x0, false),
    (0x0, false),
    (0x1B58, false),   // X25 = BugCheckParameter1
    (0xC2_0860, true), // X26 = BugCheckParameter2
    (0x0, false),
    (0x0, false),
];
/// DUMP_HEADER64 BootId (+0x1054): 0xD on the ARM64 dump; `PAGE` on D1.
pub(crate) const ARM64_BOOT_ID: u32 = 0xD;
