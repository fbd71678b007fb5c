//! The trace header group's extension records (group 0x00) and PerfInfo (group 0x0F): DPC,
//! ISR, sampled profile, system calls.
//!
//! Sources (see [`super::process`] for the full references): \[MOF\] the Windows 10 SDK's
//! `wmicore.mof` (10.0.16299); \[TE\] TraceEvent's KernelTraceEventParser.cs; \[NTWMI\] the
//! Windows 10 SDK's `ntwmi.h` (10.0.10240); \[EP\] etl-parser 1.0.1; the real triage dumps and
//! ShutdownPerfDiagLogger.etl of shared/data (tests/mof_real.rs).

use super::{Class, Field, Ty};

/// The trace header group (the header record 0x0000 itself is the log file's header, read by
/// `etl::header`).
pub(super) const HEADER: &[Class] = &[
    // [MOF] Header_Extension_TypeGroup (Extension, EndExtension); [TE]
    // HeaderExtensionTraceData: exact length 36 in version 2; [EP] Header_Extension_TypeGroup;
    // [NTWMI] WMI_LOG_TYPE_HEADER_EXTENSION, WMI_LOG_TYPE_GROUP_MASKS_END; the real file's
    // 0x0005 and 0x0020.
    Class {
        name: "Header_Extension_TypeGroup",
        types: &[5, 32],
        version: 2,
        fields: &[&[
            ("GroupMask1", Ty::U32),
            ("GroupMask2", Ty::U32),
            ("GroupMask3", Ty::U32),
            ("GroupMask4", Ty::U32),
            ("GroupMask5", Ty::U32),
            ("GroupMask6", Ty::U32),
            ("GroupMask7", Ty::U32),
            ("GroupMask8", Ty::U32),
            ("KernelEventVersion", Ty::U32),
        ]],
        tail: &[],
    },
    // [MOF] RDComplete (no fields); [TE] EmptyTraceData "RundownComplete"; [NTWMI]
    // WMI_LOG_TYPE_RUNDOWN_COMPLETE; the real file's 0x0008 records are empty.
    Class {
        name: "RDComplete",
        types: &[8],
        version: 2,
        fields: &[],
        tail: &[],
    },
];

/// PERFINFO_INTERRUPT_INFORMATION up to its Reserved byte.
///
/// \[NTWMI\] declares it packed: `ULONGLONG InitialTime; PVOID ServiceRoutine; UCHAR
/// ReturnValue; USHORT Vector; UCHAR Reserved` (0x14 bytes on 64-bit), and \[MOF\] 10.0.16299's
/// ISR class agrees (uint8, uint16, uint8), as does the PDB-derived layout of Windows 10 1607
/// to 11 (triage-etw.md \[H3\]). \[TE\] (exact length HostOffset(16, 1)) reads Vector as the
/// byte at +0x11, and the Vista MOF of learn.microsoft.com's "ISR class" page calls +0x11 a
/// uint8 Vector and +0x12 a uint16 Reserved: the same bytes, a different split, which only
/// matters when +0x12 is not zero (the real x64 triage dump's vectors 0x52 and 0x60 read the
/// same either way; its arm64 dump's bytes `07 0a 00` read 0x0a07 here, 7 and 0x000a there).
/// We follow the kernel's structure.
const INTERRUPT: &[Field] = &[
    ("InitialTime", Ty::U64),
    ("Routine", Ty::Ptr),
    ("ReturnValue", Ty::U8),
    ("Vector", Ty::U16),
    ("Reserved", Ty::U8),
];

/// The PerfInfo group (version 2 unless said).
pub(super) const PERFINFO: &[Class] = &[
    // [MOF] SampledProfile: InstructionPointer, ThreadId, uint16 Count, uint16 Reserved;
    // [NTWMI] PERFINFO_SAMPLED_PROFILE_INFORMATION and [TE] SampledProfileTraceData (exact
    // length HostOffset(12, 1)) split MOF's Reserved into a flags byte (ExecutingDpc bit 0,
    // ExecutingIsr bit 1, Priority bits 3-7) and Rank: their names are used.
    Class {
        name: "SampledProfile",
        types: &[46],
        version: 2,
        fields: &[&[
            ("InstructionPointer", Ty::Ptr),
            ("ThreadId", Ty::U32),
            ("Count", Ty::U16),
            ("Flags", Ty::U8),
            ("Rank", Ty::U8),
        ]],
        tail: &[],
    },
    // [MOF] PmcCounterProfile; [NTWMI] PERFINFO_PMC_SAMPLE_INFORMATION.
    Class {
        name: "PmcCounterProfile",
        types: &[47],
        version: 2,
        fields: &[&[
            ("InstructionPointer", Ty::Ptr),
            ("ThreadId", Ty::U32),
            ("ProfileSource", Ty::U16),
            ("Reserved", Ty::U16),
        ]],
        tail: &[],
    },
    // [MOF] SampledProfileInterval_V2; [NTWMI] PERFINFO_SAMPLED_PROFILE_CONFIG; [TE]
    // SampledProfileIntervalTraceData: exact length 12 in version 2.
    Class {
        name: "SampledProfileInterval_V2",
        types: &[72, 73, 74],
        version: 2,
        fields: &[SAMPLED_PROFILE_INTERVAL],
        tail: &[],
    },
    // [MOF] SampledProfileInterval_V3 (CollectionStart, CollectionEnd): version 2's fields and
    // the source's name; [TE] at least 12 bytes in version 3.
    Class {
        name: "SampledProfileInterval_V3",
        types: &[73, 74],
        version: 3,
        fields: &[SAMPLED_PROFILE_INTERVAL, &[("SourceName", Ty::Utf16Z)]],
        tail: &[],
    },
    // [MOF] SysCallEnter; [NTWMI] PERFINFO_SYSCALL_ENTER_DATA; [TE] exact length
    // HostOffset(4, 1).
    Class {
        name: "SysCallEnter",
        types: &[51],
        version: 2,
        fields: &[&[("SysCallAddress", Ty::Ptr)]],
        tail: &[],
    },
    // [MOF] SysCallExit; [NTWMI] PERFINFO_SYSCALL_EXIT_DATA (an NTSTATUS); [TE] exact length 4.
    Class {
        name: "SysCallExit",
        types: &[52],
        version: 2,
        fields: &[&[("SysCallNtStatus", Ty::Hex32)]],
        tail: &[],
    },
    // See INTERRUPT: ISR (67) and the passive-level ISR-PASS (95) of [MOF]; the real dumps'
    // 0x0f43 records (x64: 1, arm64: 22).
    Class {
        name: "ISR",
        types: &[67, 95],
        version: 2,
        fields: &[INTERRUPT],
        tail: &[],
    },
    // [MOF] ISR_MSI: the interrupt information and the message number; [TE] ISRTraceData reads
    // the message at HostOffset(16, 1) when the payload is 24 bytes on 64-bit; the real x64
    // dump's 73 0x0f32 records are 24 bytes.
    Class {
        name: "ISR_MSI",
        types: &[50],
        version: 2,
        fields: &[INTERRUPT, &[("MessageNumber", Ty::U32)]],
        tail: &[],
    },
    // [MOF] DPC (ThreadedDPC 66, DPC 68, TimerDPC 69, IOTimer 70); [NTWMI]
    // PERFINFO_DPC_INFORMATION {ULONGLONG InitialTime; PVOID DpcRoutine}; [TE] DPCTraceData
    // (66, 68, 69): Routine at +8 on both widths, exact length HostOffset(12, 1); the real
    // dumps' 0x0f44 and 0x0f45 records.
    Class {
        name: "DPC",
        types: &[66, 68, 69, 70],
        version: 2,
        fields: &[&[("InitialTime", Ty::U64), ("Routine", Ty::Ptr)]],
        tail: &[],
    },
    // [MOF] DebuggerEnabled (no fields); [TE] EmptyTraceData.
    Class {
        name: "DebuggerEnabled",
        types: &[58],
        version: 2,
        fields: &[],
        tail: &[],
    },
];

/// PERFINFO_SAMPLED_PROFILE_CONFIG.
const SAMPLED_PROFILE_INTERVAL: &[Field] = &[
    ("Source", Ty::U32),
    ("NewInterval", Ty::U32),
    ("OldInterval", Ty::U32),
];
