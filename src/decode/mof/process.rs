//! Process (group 0x03), thread (0x05) and image (0x14) events.
//!
//! Sources, cited per class below:
//! - \[MOF\] Microsoft's kernel MOF schema, `wmicore.mof` of the Windows 10 SDK 10.0.16299
//!   (github.com/tpn/winsdk-10, `Include/10.0.16299.0/km/wmicore.mof`), the text
//!   learn.microsoft.com's ETW class pages are simplified from;
//! - \[TE\] Microsoft TraceEvent, `src/TraceEvent/Parsers/KernelTraceEventParser.cs` of
//!   github.com/microsoft/perfview (MIT): offsets and exact lengths per version;
//! - \[NTWMI\] `ntwmi.h` of the Windows 10 SDK 10.0.10240 (tpn/winsdk-10,
//!   `Include/10.0.10240.0/um/minwin/ntwmi.h`): the kernel's own structures and hook names;
//! - \[EP\] airbus-cert etl-parser 1.0.1, `etl/parsers/kernel/*.py` (Apache-2.0);
//! - the real ShutdownPerfDiagLogger.etl of shared/data (Windows 10), whose records of these
//!   classes decode exactly (tests/etl_files.rs).

use super::{Class, Field, Ty};

/// Process_V2_TypeGroup1 up to ExitStatus (\[MOF\]; \[TE\] ProcessTraceData).
const PROCESS_HEAD: &[Field] = &[
    ("UniqueProcessKey", Ty::Ptr),
    ("ProcessId", Ty::U32),
    ("ParentId", Ty::U32),
    ("SessionId", Ty::U32),
    // MOF sint32 (an NTSTATUS: 0xC000013A is -1073741510, as etl-parser and dissect.etl give it).
    ("ExitStatus", Ty::I32),
];

/// Version 3 and later: the page directory base follows ExitStatus.
const PROCESS_DTB: &[Field] = &[("DirectoryTableBase", Ty::Ptr)];

/// Version 4 and later: the process flags.
const PROCESS_FLAGS: &[Field] = &[("Flags", Ty::U32)];

/// The SID and the names every version ends with (version 2 and 3).
const PROCESS_NAMES: &[Field] = &[
    ("UserSID", Ty::TokenUserSid),
    ("ImageFileName", Ty::AnsiZ),
    ("CommandLine", Ty::Utf16Z),
];

/// Version 4 and later add the package and application names.
const PROCESS_PACKAGE: &[Field] = &[
    ("PackageFullName", Ty::Utf16Z),
    ("ApplicationId", Ty::Utf16Z),
];

/// Image_Load version 3 (\[MOF\] `Image_Load`; \[NTWMI\] `WMI_IMAGELOAD_INFORMATION`; \[TE\]
/// ImageLoadTraceData; \[EP\] `ImageLoad`): also the payload of the process group's
/// LOAD_IMAGE event 0x030a.
const IMAGE_LOAD_V3: &[Field] = &[
    ("ImageBase", Ty::Ptr),
    ("ImageSize", Ty::Ptr),
    ("ProcessId", Ty::U32),
    ("ImageCheckSum", Ty::U32),
    ("TimeDateStamp", Ty::U32),
    ("SignatureLevel", Ty::U8),
    ("SignatureType", Ty::U8),
    ("Reserved0", Ty::U16),
    ("DefaultBase", Ty::Ptr),
    ("Reserved1", Ty::U32),
    ("Reserved2", Ty::U32),
    ("Reserved3", Ty::U32),
    ("Reserved4", Ty::U32),
    ("FileName", Ty::Utf16Z),
];

/// The process group.
pub(super) const PROCESS: &[Class] = &[
    // [MOF] Process_V2_TypeGroup1 (Vista); [TE] exact length of version 2.
    Class {
        name: "Process_V2_TypeGroup1",
        types: &[1, 2, 3, 4, 39],
        version: 2,
        fields: &[PROCESS_HEAD, PROCESS_NAMES],
        tail: &[],
    },
    // [MOF] Process_V3_TypeGroup1 (Windows 7); [TE] DirectoryTableBase at HostOffset(20, 1), the
    // SID after it. [EP] reads this version's SID without the TOKEN_USER before it, unlike its
    // own version 4 and [TE]; we follow [MOF] and [TE].
    Class {
        name: "Process_V3_TypeGroup1",
        types: &[1, 2, 3, 4, 39],
        version: 3,
        fields: &[PROCESS_HEAD, PROCESS_DTB, PROCESS_NAMES],
        tail: &[],
    },
    // [MOF] Process_V4_TypeGroup1 (Windows 8 and later); [NTWMI] WMI_PROCESS_INFORMATION; [TE];
    // [EP]; the real file's 0x0302-0x0304 (etl::rundown writes the same fields).
    Class {
        name: "Process_V4_TypeGroup1",
        types: &[1, 2, 3, 4, 39],
        version: 4,
        fields: &[
            PROCESS_HEAD,
            PROCESS_DTB,
            PROCESS_FLAGS,
            PROCESS_NAMES,
            PROCESS_PACKAGE,
        ],
        tail: &[],
    },
    // [MOF] Process_Defunct_TypeGroup1 (version 5, type 39 only): version 4's fields and the
    // exit time; [TE] length of version 5 = version 4's + 8; [EP] Process_Defunct_TypeGroup1;
    // the real file's 0x0327 records.
    Class {
        name: "Process_Defunct_TypeGroup1",
        types: &[39],
        version: 5,
        fields: &[
            PROCESS_HEAD,
            PROCESS_DTB,
            PROCESS_FLAGS,
            PROCESS_NAMES,
            PROCESS_PACKAGE,
            &[("ExitTime", Ty::U64)],
        ],
        tail: &[],
    },
    // [MOF] Process_Terminate_TypeGroup1 (type 11, version 2); [EP] Process_Terminate_TypeGroup1;
    // [NTWMI] WMI_LOG_TYPE_PROCESS_TERMINATE.
    Class {
        name: "Process_Terminate_TypeGroup1",
        types: &[11],
        version: 2,
        fields: &[&[("ProcessId", Ty::U32)]],
        tail: &[],
    },
    // The process group's LOAD_IMAGE (type 10, [NTWMI] WMI_LOG_TYPE_PROCESS_LOAD_IMAGE), not
    // in [MOF]: [EP] decodes it with Image_Load version 3's layout, and the real file's 72
    // records fit it exactly (the name ends at the record's end, ProcessId is the header's).
    Class {
        name: "Image_Load",
        types: &[10],
        version: 3,
        fields: &[IMAGE_LOAD_V3],
        tail: &[],
    },
    // [MOF] Process_V2_TypeGroup2 (PerfCtr, PerfCtrRundown); [TE] ProcessCtrTraceData: the
    // sizes from offset 16, exact length HostOffset(60, 11).
    Class {
        name: "Process_V2_TypeGroup2",
        types: &[32, 33],
        version: 2,
        fields: &[&[
            ("ProcessId", Ty::U32),
            ("PageFaultCount", Ty::U32),
            ("HandleCount", Ty::U32),
            ("Reserved", Ty::U32),
            ("PeakVirtualSize", Ty::SizeT),
            ("PeakWorkingSetSize", Ty::SizeT),
            ("PeakPagefileUsage", Ty::SizeT),
            ("QuotaPeakPagedPoolUsage", Ty::SizeT),
            ("QuotaPeakNonPagedPoolUsage", Ty::SizeT),
            ("VirtualSize", Ty::SizeT),
            ("WorkingSetSize", Ty::SizeT),
            ("PagefileUsage", Ty::SizeT),
            ("QuotaPagedPoolUsage", Ty::SizeT),
            ("QuotaNonPagedPoolUsage", Ty::SizeT),
            ("PrivatePageCount", Ty::SizeT),
        ]],
        tail: &[],
    },
];

/// Thread_V2_TypeGroup1 (\[MOF\]; \[NTWMI\] `WMI_EXTENDED_THREAD_INFORMATION`, whose union
/// calls the seventh field StartAddr or Affinity).
const THREAD_HEAD: &[Field] = &[
    ("ProcessId", Ty::U32),
    ("TThreadId", Ty::U32),
    ("StackBase", Ty::Ptr),
    ("StackLimit", Ty::Ptr),
    ("UserStackBase", Ty::Ptr),
    ("UserStackLimit", Ty::Ptr),
];

/// After the seventh field: the Win32 start address, TEB, tag.
const THREAD_REST: &[Field] = &[
    ("Win32StartAddr", Ty::Ptr),
    ("TebBase", Ty::Ptr),
    ("SubProcessTag", Ty::U32),
];

/// The thread group (context switches and the other scheduler events have their own decoders).
pub(super) const THREAD: &[Class] = &[
    // [MOF] Thread_V2_TypeGroup1 (Vista, Windows 7); [TE] ThreadTraceData: exact length of
    // version 2 HostOffset(40, 7).
    Class {
        name: "Thread_V2_TypeGroup1",
        types: &[1, 2, 3, 4],
        version: 2,
        fields: &[THREAD_HEAD, &[("StartAddr", Ty::Ptr)], THREAD_REST],
        tail: &[],
    },
    // [MOF] Thread_V3_TypeGroup1; [NTWMI]; [TE] (priorities at HostOffset(40, 7), the name
    // after them); [EP]; the real file's 0x0501-0x0504.
    Class {
        name: "Thread_V3_TypeGroup1",
        types: &[1, 2, 3, 4],
        version: 3,
        fields: &[
            THREAD_HEAD,
            &[("Affinity", Ty::Ptr)],
            THREAD_REST,
            &[
                ("BasePriority", Ty::U8),
                ("PagePriority", Ty::U8),
                ("IoPriority", Ty::U8),
                ("ThreadFlags", Ty::U8),
            ],
        ],
        // The real ShutdownPerfDiagLogger.etl (shared/data) has it on every thread event:
        // an empty name is its 2-byte NUL (records of 0x6a bytes), a named thread longer;
        // [TE] reads it when the payload goes on (HostOffset(46, 7)).
        tail: &[("ThreadName", Ty::Utf16Z)],
    },
];

/// The image group.
pub(super) const IMAGE: &[Class] = &[
    // [MOF] Image_Load_V2 (Vista, Windows 7: a 32-bit Reserved0 where version 3 has the
    // signature bytes); [TE] exact length SkipUnicodeString(HostOffset(44, 3)).
    Class {
        name: "Image_Load_V2",
        types: &[10, 2, 3, 4],
        version: 2,
        fields: &[&[
            ("ImageBase", Ty::Ptr),
            ("ImageSize", Ty::Ptr),
            ("ProcessId", Ty::U32),
            ("ImageCheckSum", Ty::U32),
            ("TimeDateStamp", Ty::U32),
            ("Reserved0", Ty::U32),
            ("DefaultBase", Ty::Ptr),
            ("Reserved1", Ty::U32),
            ("Reserved2", Ty::U32),
            ("Reserved3", Ty::U32),
            ("Reserved4", Ty::U32),
            ("FileName", Ty::Utf16Z),
        ]],
        tail: &[],
    },
    // See IMAGE_LOAD_V3; the real file's 0x1402-0x1404.
    Class {
        name: "Image_Load",
        types: &[10, 2, 3, 4],
        version: 3,
        fields: &[IMAGE_LOAD_V3],
        tail: &[],
    },
    // [MOF] KernelImageBase (type 33, version 2); [EP] KernelImageBase; [NTWMI]
    // WMI_LOG_TYPE_IMAGE_KERNEL_BASE; the real file's 0x1421 (ntoskrnl's base).
    Class {
        name: "KernelImageBase",
        types: &[33],
        version: 2,
        fields: &[&[("ImageBase", Ty::Ptr)]],
        tail: &[],
    },
    // [MOF] HypercallPage (type 34, version 2); [EP] HyperCallPage; [NTWMI]
    // WMI_LOG_TYPE_IMAGE_HYPERCALL_PAGE; the real file's 0x1422.
    Class {
        name: "HypercallPage",
        types: &[34],
        version: 2,
        fields: &[&[("HypercallPageVa", Ty::Ptr)]],
        tail: &[],
    },
];
