//! DiskIo (group 0x01) and FileIo (group 0x04).
//!
//! Sources (see [`super::process`] for the full references): \[MOF\] the Windows 10 SDK's
//! `wmicore.mof` (10.0.16299): version 2 is Vista and Windows 7 (`DiskIo_V2_*`,
//! `FileIo_V2_*`), version 3 Windows 8 and later (`DiskIo_*`, `FileIo_*`); \[NTWMI\] the Windows
//! 10 SDK's `ntwmi.h` (10.0.10240): `ETW_DISKIO_*`, `PERFINFO_FILE_*`; \[TE\] TraceEvent's
//! DiskIOTraceData, FileIO*TraceData (offsets per version, exact lengths); \[EP\] etl-parser
//! 1.0.1 (`io.py`, `file.py`). No real record of these groups is in shared/data.

use super::{Class, Field, Ty};

/// A disk transfer up to its response time (\[MOF\] DiskIo_V2_TypeGroup1; \[NTWMI\]
/// `_ETW_DISKIO_READWRITE_V2`; \[TE\] Irp at HostOffset(28, 1), the time at HostOffset(32, 2)).
const DISK_RW: &[Field] = &[
    ("DiskNumber", Ty::U32),
    ("IrpFlags", Ty::U32),
    ("TransferSize", Ty::U32),
    ("Reserved", Ty::U32),
    ("ByteOffset", Ty::U64),
    ("FileObject", Ty::Ptr),
    ("Irp", Ty::Ptr),
    ("HighResResponseTime", Ty::U64),
];

/// A flush up to its IRP (\[MOF\] DiskIo_V2_TypeGroup3; \[NTWMI\]
/// `_ETW_DISKIO_FLUSH_BUFFERS_V2`; \[TE\] Irp at 16).
const DISK_FLUSH: &[Field] = &[
    ("DiskNumber", Ty::U32),
    ("IrpFlags", Ty::U32),
    ("HighResResponseTime", Ty::U64),
    ("Irp", Ty::Ptr),
];

/// Version 3 adds the issuing thread to each DiskIo layout.
const ISSUER: &[Field] = &[("IssuingThreadId", Ty::U32)];

/// The IRP of an initiation event.
const IRP: &[Field] = &[("Irp", Ty::Ptr)];

/// The DiskIo group.
pub(super) const DISK_IO: &[Class] = &[
    // [MOF] DiskIo_V2_TypeGroup1 (Read, Write); [NTWMI]; [TE].
    Class {
        name: "DiskIo_V2_TypeGroup1",
        types: &[10, 11],
        version: 2,
        fields: &[DISK_RW],
        tail: &[],
    },
    // [MOF] DiskIo_TypeGroup1 (Read, Write, OpticalRead, OpticalWrite); [NTWMI]
    // ETW_DISKIO_READWRITE_V3, ETW_OPTICALIO_READWRITE; [TE] the thread at HostOffset(40, 2);
    // [EP] DiskIo_TypeGroup1 (64-bit only).
    Class {
        name: "DiskIo_TypeGroup1",
        types: &[10, 11, 55, 56],
        version: 3,
        fields: &[DISK_RW, ISSUER],
        tail: &[],
    },
    // [MOF] DiskIo_V2_TypeGroup2 (ReadInit, WriteInit, FlushInit); [TE] exact length
    // HostOffset(4, 1).
    Class {
        name: "DiskIo_V2_TypeGroup2",
        types: &[12, 13, 15],
        version: 2,
        fields: &[IRP],
        tail: &[],
    },
    // [MOF] DiskIo_TypeGroup2 (and the optical initiations); [NTWMI]
    // WMI_DISKIO_READWRITE_INIT, ETW_OPTICALIO_INIT; [TE] the thread at HostOffset(4, 1).
    Class {
        name: "DiskIo_TypeGroup2",
        types: &[12, 13, 15, 58, 59, 60],
        version: 3,
        fields: &[IRP, ISSUER],
        tail: &[],
    },
    // [MOF] DiskIo_V2_TypeGroup3 (FlushBuffers); [NTWMI]; [TE].
    Class {
        name: "DiskIo_V2_TypeGroup3",
        types: &[14],
        version: 2,
        fields: &[DISK_FLUSH],
        tail: &[],
    },
    // [MOF] DiskIo_TypeGroup3 (FlushBuffers, OpticalFlushBuffers); [NTWMI]
    // ETW_DISKIO_FLUSH_BUFFERS_V3, ETW_OPTICALIO_FLUSH_BUFFERS. [EP] DiskIo_TypeGroup3 declares
    // Irp as Int32ul on 64-bit (its bug: [MOF] says pointer, [NTWMI] PVOID, [TE] reads an
    // address), so it reads IssuingThreadId from Irp's high half.
    Class {
        name: "DiskIo_TypeGroup3",
        types: &[14, 57],
        version: 3,
        fields: &[DISK_FLUSH, ISSUER],
        tail: &[],
    },
    // [MOF] DriverMajorFunctionCall; [TE] DriverMajorFunctionCallTraceData (exact length
    // HostOffset(24, 3)).
    Class {
        name: "DriverMajorFunctionCall",
        types: &[34],
        version: 2,
        fields: &[&[
            ("MajorFunction", Ty::U32),
            ("MinorFunction", Ty::U32),
            ("RoutineAddr", Ty::Ptr),
            ("FileObject", Ty::Ptr),
            ("Irp", Ty::Ptr),
            ("UniqMatchId", Ty::U32),
        ]],
        tail: &[],
    },
    // [MOF] DriverMajorFunctionReturn; [TE] exact length HostOffset(8, 1).
    Class {
        name: "DriverMajorFunctionReturn",
        types: &[35],
        version: 2,
        fields: &[IRP, MATCH_ID],
        tail: &[],
    },
    // [MOF] DriverCompleteRequestReturn; [TE] exact length HostOffset(8, 1).
    Class {
        name: "DriverCompleteRequestReturn",
        types: &[53],
        version: 2,
        fields: &[IRP, MATCH_ID],
        tail: &[],
    },
    // [MOF] DriverCompletionRoutine (Routine, IrpPtr); [TE] exact length HostOffset(12, 2).
    Class {
        name: "DriverCompletionRoutine",
        types: &[37],
        version: 2,
        fields: &[&[("Routine", Ty::Ptr), ("IrpPtr", Ty::Ptr)], MATCH_ID],
        tail: &[],
    },
    // [MOF] DriverCompleteRequest (RoutineAddr, Irp); [TE] exact length HostOffset(12, 2).
    Class {
        name: "DriverCompleteRequest",
        types: &[52],
        version: 2,
        fields: &[&[("RoutineAddr", Ty::Ptr), ("Irp", Ty::Ptr)], MATCH_ID],
        tail: &[],
    },
];

/// The driver events' match id.
const MATCH_ID: &[Field] = &[("UniqMatchId", Ty::U32)];

/// FileIo fields: the IRP first in every operation.
const IRP_PTR: &[Field] = &[("IrpPtr", Ty::Ptr)];
/// Version 2 carries the thread id in a pointer-sized slot right after the IRP.
const TTID_V2: &[Field] = &[("TTID", Ty::SizeT)];
/// Version 3 moves it, 32-bit, after the file's pointers.
const TTID_V3: &[Field] = &[("TTID", Ty::U32)];
const FILE_OBJECT: &[Field] = &[("FileObject", Ty::Ptr)];
const FILE_KEY: &[Field] = &[("FileObject", Ty::Ptr), ("FileKey", Ty::Ptr)];
const CREATE: &[Field] = &[
    ("CreateOptions", Ty::U32),
    ("FileAttributes", Ty::U32),
    ("ShareAccess", Ty::U32),
    ("OpenPath", Ty::Utf16Z),
];
const IO_SIZE: &[Field] = &[("IoSize", Ty::U32), ("IoFlags", Ty::U32)];
const OFFSET: &[Field] = &[("Offset", Ty::U64)];
const EXTRA_INFO: &[Field] = &[("ExtraInfo", Ty::Ptr)];
const INFO_CLASS: &[Field] = &[("InfoClass", Ty::U32)];
const DIR_ENUM: &[Field] = &[
    ("Length", Ty::U32),
    ("InfoClass", Ty::U32),
    ("FileIndex", Ty::U32),
    ("FileName", Ty::Utf16Z),
];
const FILE_NAME: &[Field] = &[("FileObject", Ty::Ptr), ("FileName", Ty::Utf16Z)];
const OP_END: &[Field] = &[
    ("IrpPtr", Ty::Ptr),
    ("ExtraInfo", Ty::Ptr),
    ("NtStatus", Ty::Hex32),
];

/// The FileIo group. Version 2: \[MOF\] `FileIo_V2_*` and \[TE\] (the `Version <= 2` offsets
/// and exact lengths); version 3: \[MOF\] `FileIo_*`, \[NTWMI\] `PERFINFO_FILE_*` and \[TE\].
pub(super) const FILE_IO: &[Class] = &[
    // Name, FileCreate, FileDelete, FileRundown: [NTWMI] WMI_FILE_IO; [TE] exact length
    // SkipUnicodeString(HostOffset(4, 1)) in every version; [EP] FileIo_V2_Name.
    Class {
        name: "FileIo_V2_Name",
        types: &[0, 32, 35, 36],
        version: 2,
        fields: &[FILE_NAME],
        tail: &[],
    },
    Class {
        name: "FileIo_Name",
        types: &[0, 32, 35, 36],
        version: 3,
        fields: &[FILE_NAME],
        tail: &[],
    },
    // Create: [TE] FileObject at HostOffset(8, 2) in version 2, HostOffset(4, 1) in 3;
    // [NTWMI] PERFINFO_FILE_CREATE.
    Class {
        name: "FileIo_V2_Create",
        types: &[64],
        version: 2,
        fields: &[IRP_PTR, TTID_V2, FILE_OBJECT, CREATE],
        tail: &[],
    },
    Class {
        name: "FileIo_Create",
        types: &[64],
        version: 3,
        fields: &[IRP_PTR, FILE_OBJECT, TTID_V3, CREATE],
        tail: &[],
    },
    // Cleanup, Close, Flush: [NTWMI] PERFINFO_FILE_SIMPLE_OPERATION; [TE] exact lengths
    // HostOffset(16, 4) and HostOffset(16, 3).
    Class {
        name: "FileIo_V2_SimpleOp",
        types: &[65, 66, 73],
        version: 2,
        fields: &[IRP_PTR, TTID_V2, FILE_KEY],
        tail: &[],
    },
    Class {
        name: "FileIo_SimpleOp",
        types: &[65, 66, 73],
        version: 3,
        fields: &[IRP_PTR, FILE_KEY, TTID_V3],
        tail: &[],
    },
    // Read, Write: [TE] exact length HostOffset(32, 4) in version 2. Version 3: [MOF] ends at
    // IoFlags; [NTWMI] PERFINFO_FILE_READ_WRITE (packed) adds a 32-bit ExtraFlags, and [TE]
    // notes 48-byte records on 64-bit (IoFlags ends at 44): decoded when present.
    Class {
        name: "FileIo_V2_ReadWrite",
        types: &[67, 68],
        version: 2,
        fields: &[OFFSET, IRP_PTR, TTID_V2, FILE_KEY, IO_SIZE],
        tail: &[],
    },
    Class {
        name: "FileIo_ReadWrite",
        types: &[67, 68],
        version: 3,
        fields: &[OFFSET, IRP_PTR, FILE_KEY, TTID_V3, IO_SIZE],
        tail: &[("ExtraFlags", Ty::U32)],
    },
    // SetInfo, Delete, Rename, QueryInfo, FSControl: [NTWMI] PERFINFO_FILE_INFORMATION; [TE]
    // exact lengths HostOffset(24, 5) and HostOffset(24, 4).
    Class {
        name: "FileIo_V2_Info",
        types: &[69, 70, 71, 74, 75],
        version: 2,
        fields: &[IRP_PTR, TTID_V2, FILE_KEY, EXTRA_INFO, INFO_CLASS],
        tail: &[],
    },
    Class {
        name: "FileIo_Info",
        types: &[69, 70, 71, 74, 75],
        version: 3,
        fields: &[IRP_PTR, FILE_KEY, EXTRA_INFO, TTID_V3, INFO_CLASS],
        tail: &[],
    },
    // DirEnum, DirNotify: [NTWMI] PERFINFO_FILE_DIRENUM; [TE] the name at HostOffset(28, 4)
    // and HostOffset(28, 3).
    Class {
        name: "FileIo_V2_DirEnum",
        types: &[72, 77],
        version: 2,
        fields: &[IRP_PTR, TTID_V2, FILE_KEY, DIR_ENUM],
        tail: &[],
    },
    Class {
        name: "FileIo_DirEnum",
        types: &[72, 77],
        version: 3,
        fields: &[IRP_PTR, FILE_KEY, TTID_V3, DIR_ENUM],
        tail: &[],
    },
    // OperationEnd: [NTWMI] PERFINFO_FILE_OPERATION_END (an NTSTATUS); [TE] exact length
    // HostOffset(12, 2) in every version.
    Class {
        name: "FileIo_V2_OpEnd",
        types: &[76],
        version: 2,
        fields: &[OP_END],
        tail: &[],
    },
    Class {
        name: "FileIo_OpEnd",
        types: &[76],
        version: 3,
        fields: &[OP_END],
        tail: &[],
    },
    // DeletePath, RenamePath, SetLinkPath (version 3): [MOF] FileIo_PathOperation; [NTWMI]
    // PERFINFO_FILE_PATH_OPERATION.
    Class {
        name: "FileIo_PathOperation",
        types: &[79, 80, 81],
        version: 3,
        fields: &[
            IRP_PTR,
            FILE_KEY,
            EXTRA_INFO,
            TTID_V3,
            INFO_CLASS,
            &[("FileName", Ty::Utf16Z)],
        ],
        tail: &[],
    },
    // MapFile, UnmapFile, MapFileDCStart, MapFileDCEnd (version 2): [MOF] FileIo_V2_MapFile;
    // [TE] MapFileTraceData (the process id at HostOffset(20, 3) before version 3; its
    // version 3 layout it calls uncertain, so version 3 is not decoded).
    Class {
        name: "FileIo_V2_MapFile",
        types: &[37, 38, 39, 40],
        version: 2,
        fields: &[&[
            ("ViewBase", Ty::Ptr),
            ("FileObject", Ty::Ptr),
            ("MiscInfo", Ty::U64),
            ("ViewSize", Ty::SizeT),
            ("ProcessId", Ty::U32),
        ]],
        tail: &[],
    },
];
