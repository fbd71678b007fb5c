//! PageFault (group 0x02), Registry (0x09) and SystemConfig (0x0B), version 2 unless said.
//!
//! Sources (see [`super::process`] for the full references): \[MOF\] the Windows 10 SDK's
//! `wmicore.mof` (10.0.16299) `PageFault_*`, `Registry_*` and `SystemConfig_V*` classes;
//! \[NTWMI\] the Windows 10 SDK's `ntwmi.h` (10.0.10240); \[TE\] TraceEvent's
//! Memory*TraceData, RegistryTraceData, SystemConfig*TraceData (offsets, exact lengths). No
//! real record of these groups is in shared/data.

use super::{Class, Field, Ty};

/// The PageFault group.
pub(super) const PAGE_FAULT: &[Class] = &[
    // [MOF] PageFault_TypeGroup1 (TransitionFault, DemandZeroFault, CopyOnWrite,
    // GuardPageFault, HardPageFault, AccessViolation); [NTWMI] WMI_PAGE_FAULT; [TE]
    // MemoryPageFaultTraceData (exact length HostOffset(8, 2)).
    Class {
        name: "PageFault_TypeGroup1",
        types: &[10, 11, 12, 13, 14, 15],
        version: 2,
        fields: &[&[("VirtualAddress", Ty::Ptr), ("ProgramCounter", Ty::Ptr)]],
        tail: &[],
    },
    // [MOF] PageFault_HardFault; [NTWMI] PERFINFO_HARDPAGEFAULT_INFORMATION, "starts with
    // InitialTime (LARGE_INTEGER) not shown in the structure"; [TE] MemoryHardFaultTraceData
    // (exact length HostOffset(32, 2)).
    Class {
        name: "PageFault_HardFault",
        types: &[32],
        version: 2,
        fields: &[&[
            ("InitialTime", Ty::U64),
            ("ReadOffset", Ty::U64),
            ("VirtualAddress", Ty::Ptr),
            ("FileObject", Ty::Ptr),
            ("TThreadId", Ty::U32),
            ("ByteCount", Ty::U32),
        ]],
        tail: &[],
    },
    // [MOF] PageFault_VirtualAlloc (VirtualAlloc, VirtualFree); [NTWMI] PERFINFO_VIRTUAL_ALLOC;
    // [TE] VirtualAllocTraceData (exact length HostOffset(0x10, 2)).
    Class {
        name: "PageFault_VirtualAlloc",
        types: &[98, 99],
        version: 2,
        fields: &[&[
            ("BaseAddress", Ty::Ptr),
            ("RegionSize", Ty::SizeT),
            ("ProcessId", Ty::U32),
            ("Flags", Ty::U32),
        ]],
        tail: &[],
    },
    // [MOF] PageFault_ImageLoadBacked; [TE] MemoryImageLoadBackedTraceData (exact length
    // HostOffset(12, 1)).
    Class {
        name: "PageFault_ImageLoadBacked",
        types: &[105],
        version: 2,
        fields: &[&[
            ("FileObject", Ty::Ptr),
            ("DeviceChar", Ty::U32),
            ("FileChar", Ty::U16),
            ("LoadFlags", Ty::U16),
        ]],
        tail: &[],
    },
];

/// The Registry group.
pub(super) const REGISTRY: &[Class] = &[
    // [MOF] Registry_TypeGroup1 (Create .. QuerySecurity, types 10-29); [NTWMI] WMI_REGISTRY
    // (the status, the index or information class, the KCB, the name); [TE] RegistryTraceData
    // (the name at HostOffset(0x14, 1), exact length in version 2).
    Class {
        name: "Registry_TypeGroup1",
        types: &[
            10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
        ],
        version: 2,
        fields: &[&[
            ("InitialTime", Ty::I64),
            ("Status", Ty::Hex32),
            ("Index", Ty::U32),
            ("KeyHandle", Ty::Ptr),
            ("KeyName", Ty::Utf16Z),
        ]],
        tail: &[],
    },
];

/// The counts and names of a PnP device (\[MOF\] SystemConfig_V2_PnP; \[NTWMI\]
/// `WMI_PNP_RECORD_V3`).
const PNP: &[Field] = &[
    ("IDLength", Ty::U32),
    ("DescriptionLength", Ty::U32),
    ("FriendlyNameLength", Ty::U32),
    ("DeviceID", Ty::Utf16Z),
    ("DeviceDescription", Ty::Utf16Z),
    ("FriendlyName", Ty::Utf16Z),
];

/// A service's process and names (\[MOF\] SystemConfig_V2_Services).
const SERVICES: &[Field] = &[
    ("ProcessId", Ty::U32),
    ("ServiceState", Ty::U32),
    ("SubProcessTag", Ty::U32),
    ("ServiceName", Ty::Utf16Z),
    ("DisplayName", Ty::Utf16Z),
    ("ProcessName", Ty::Utf16Z),
];

/// An interrupt's description (after the affinity and number).
const IRQ_DESCRIPTION: &[Field] = &[
    ("IRQNum", Ty::U32),
    ("DeviceDescriptionLen", Ty::U32),
    ("DeviceDescription", Ty::Utf16Z),
];

/// The SystemConfig group: the fixed layouts. Not decoded: the CPU record of version 3 (\[MOF\]
/// puts PaeEnabled before NxEnabled, \[NTWMI\] `CPU_CONFIG_RECORD` the other way round, and
/// its natural alignment pads it on 64-bit), PnP of versions 4 and 5 (counted string arrays),
/// and the records only \[MOF\] describes.
pub(super) const SYSTEM_CONFIG: &[Class] = &[
    // [MOF] SystemConfig_V2_CPU; [TE] SystemConfigCPUTraceData (the domain name at 532, exact
    // length HostOffset(804, 1)); the hyper-threading flag is pointer-sized.
    Class {
        name: "SystemConfig_V2_CPU",
        types: &[10],
        version: 2,
        fields: &[&[
            ("MHz", Ty::U32),
            ("NumberOfProcessors", Ty::U32),
            ("MemSize", Ty::U32),
            ("PageSize", Ty::U32),
            ("AllocationGranularity", Ty::U32),
            ("ComputerName", Ty::Utf16Fixed(256)),
            ("DomainName", Ty::Utf16Fixed(134)),
            ("HyperThreadingFlag", Ty::SizeT),
        ]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_PhyDisk; [NTWMI] PHYSICAL_DISK_RECORD; [TE] exact length 568.
    Class {
        name: "SystemConfig_V2_PhyDisk",
        types: &[11],
        version: 2,
        fields: &[&[
            ("DiskNumber", Ty::U32),
            ("BytesPerSector", Ty::U32),
            ("SectorsPerTrack", Ty::U32),
            ("TracksPerCylinder", Ty::U32),
            ("Cylinders", Ty::U64),
            ("SCSIPort", Ty::U32),
            ("SCSIPath", Ty::U32),
            ("SCSITarget", Ty::U32),
            ("SCSILun", Ty::U32),
            ("Manufacturer", Ty::Utf16Fixed(256)),
            ("PartitionCount", Ty::U32),
            ("WriteCacheEnabled", Ty::U8),
            ("Pad", Ty::U8),
            ("BootDriveLetter", Ty::Utf16Fixed(3)),
            ("Spare", Ty::Utf16Fixed(2)),
        ]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_LogDisk; [TE] SystemConfigLogDiskTraceData (same offsets, 112
    // bytes).
    Class {
        name: "SystemConfig_V2_LogDisk",
        types: &[12],
        version: 2,
        fields: &[&[
            ("StartOffset", Ty::U64),
            ("PartitionSize", Ty::U64),
            ("DiskNumber", Ty::U32),
            ("Size", Ty::U32),
            ("DriveType", Ty::U32),
            ("DriveLetterString", Ty::Utf16Fixed(4)),
            ("Pad1", Ty::U32),
            ("PartitionNumber", Ty::U32),
            ("SectorsPerCluster", Ty::U32),
            ("BytesPerSector", Ty::U32),
            ("Pad2", Ty::U32),
            ("NumberOfFreeClusters", Ty::I64),
            ("TotalNumberOfClusters", Ty::I64),
            ("FileSystem", Ty::Utf16Fixed(16)),
            ("VolumeExt", Ty::U32),
            ("Pad3", Ty::U32),
        ]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_NIC; [TE] SystemConfigNICTraceData (exact length in version 2).
    Class {
        name: "SystemConfig_V2_NIC",
        types: &[13],
        version: 2,
        fields: &[&[
            ("PhysicalAddr", Ty::U64),
            ("PhysicalAddrLen", Ty::U32),
            ("Ipv4Index", Ty::U32),
            ("Ipv6Index", Ty::U32),
            ("NICDescription", Ty::Utf16Z),
            ("IpAddresses", Ty::Utf16Z),
            ("DnsServerAddresses", Ty::Utf16Z),
        ]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_Video; [TE] exact length 2584.
    Class {
        name: "SystemConfig_V2_Video",
        types: &[14],
        version: 2,
        fields: &[&[
            ("MemorySize", Ty::U32),
            ("XResolution", Ty::U32),
            ("YResolution", Ty::U32),
            ("BitsPerPixel", Ty::U32),
            ("VRefresh", Ty::U32),
            ("ChipType", Ty::Utf16Fixed(256)),
            ("DACType", Ty::Utf16Fixed(256)),
            ("AdapterString", Ty::Utf16Fixed(256)),
            ("BiosString", Ty::Utf16Fixed(256)),
            ("DeviceId", Ty::Utf16Fixed(256)),
            ("StateFlags", Ty::U32),
        ]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_Services; [TE] exact length in version 2.
    Class {
        name: "SystemConfig_V2_Services",
        types: &[15],
        version: 2,
        fields: &[SERVICES],
        tail: &[],
    },
    // [MOF] SystemConfig_V3_Services: version 2's fields and two group names; [TE] at least
    // version 2's length.
    Class {
        name: "SystemConfig_V3_Services",
        types: &[15],
        version: 3,
        fields: &[
            SERVICES,
            &[("LoadOrderGroup", Ty::Utf16Z), ("SvchostGroup", Ty::Utf16Z)],
        ],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_Power; [NTWMI] WMI_POWER_RECORD (eight bytes); [TE] exact length 8.
    Class {
        name: "SystemConfig_V2_Power",
        types: &[16],
        version: 2,
        fields: &[&[
            ("S1", Ty::U8),
            ("S2", Ty::U8),
            ("S3", Ty::U8),
            ("S4", Ty::U8),
            ("S5", Ty::U8),
            ("Pad1", Ty::U8),
            ("Pad2", Ty::U8),
            ("Pad3", Ty::U8),
        ]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_Network; [TE] exact length 16.
    Class {
        name: "SystemConfig_V2_Network",
        types: &[17],
        version: 2,
        fields: &[&[
            ("TcbTablePartitions", Ty::U32),
            ("MaxHashTableSize", Ty::U32),
            ("MaxUserPort", Ty::U32),
            ("TcpTimedWaitDelay", Ty::U32),
        ]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_IRQ; [TE] exact length SkipUnicodeString(16) in version 2.
    Class {
        name: "SystemConfig_V2_IRQ",
        types: &[21],
        version: 2,
        fields: &[&[("IRQAffinity", Ty::U64)], IRQ_DESCRIPTION],
        tail: &[],
    },
    // [MOF] SystemConfig_V3_IRQ; [NTWMI] WMI_IRQ_RECORD (the group after the affinity); [TE]
    // the description at 20 from version 3.
    Class {
        name: "SystemConfig_V3_IRQ",
        types: &[21],
        version: 3,
        fields: &[
            &[
                ("IRQAffinity", Ty::U64),
                ("IRQGroup", Ty::U16),
                ("Reserved", Ty::U16),
            ],
            IRQ_DESCRIPTION,
        ],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_PnP; [NTWMI] WMI_PNP_RECORD_V3; [TE] SystemConfigPnPTraceData.
    Class {
        name: "SystemConfig_V2_PnP",
        types: &[22],
        version: 2,
        fields: &[PNP],
        tail: &[],
    },
    // [MOF] SystemConfig_V3_PnP: the PDO's name after the friendly name; [TE] reads it there
    // before version 4.
    Class {
        name: "SystemConfig_V3_PnP",
        types: &[22],
        version: 3,
        fields: &[PNP, &[("PdoName", Ty::Utf16Z)]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_IDEChannel; [TE] exact length SkipUnicodeString(16).
    Class {
        name: "SystemConfig_V2_IDEChannel",
        types: &[23],
        version: 2,
        fields: &[&[
            ("TargetId", Ty::U32),
            ("DeviceType", Ty::U32),
            ("DeviceTimingMode", Ty::U32),
            ("LocationInformationLen", Ty::U32),
            ("LocationInformation", Ty::Utf16Z),
        ]],
        tail: &[],
    },
    // [MOF] SystemConfig_V2_DPI; [NTWMI] WMI_DPI_RECORD.
    Class {
        name: "SystemConfig_V2_DPI",
        types: &[28],
        version: 2,
        fields: &[&[("MachineDPI", Ty::U32), ("UserDPI", Ty::U32)]],
        tail: &[],
    },
];
